package config

import (
	"fmt"
	"strconv"
	"strings"
)

// Unknown keys: the suggestions an error gives for a misspelt or misplaced
// key (the nearest known key, the section that has it).

func lookupKey(sec section, k string) (keyInfo, bool) {
	for _, ki := range keys {
		if ki.sec == sec && strings.EqualFold(ki.name, k) {
			return ki, true
		}
	}
	return keyInfo{}, false
}

// unknownKey reports a key the current section does not have, with the
// section it belongs to, the nearest known key (edit distance at most 2),
// or else the section's keys.
func (p *parser) unknownKey(n int, k string) {
	sec := sectionNames[p.section]
	for _, ki := range keys {
		if strings.EqualFold(ki.name, k) {
			p.errorf(n, k, "unknown key in [%s]; it belongs in [%s]", sec, sectionNames[ki.sec])
			return
		}
	}
	best, bestD := "", 3
	if len(k) <= 64 {
		lk := strings.ToLower(k)
		for _, ki := range keys {
			if ki.sec != p.section {
				continue
			}
			if d := editDistance(lk, strings.ToLower(ki.name)); d < bestD {
				best, bestD = ki.name, d
			}
		}
	}
	if best != "" {
		p.errorf(n, k, "unknown key in [%s]; did you mean %q?", sec, best)
		return
	}
	var known []string
	for _, ki := range keys {
		if ki.sec == p.section {
			known = append(known, ki.name)
		}
	}
	p.errorf(n, k, "unknown key in [%s], which has %s (all keys: go doc github.com/wgpio/wgpio/config)", sec, strings.Join(known, ", "))
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// quoteShort quotes s for a message, cut to 40 bytes. Anything shaped like a
// base64 key (44 characters ending in '=') is replaced by "(a key)": it may be
// a private key pasted into the wrong line, and keys never reach messages.
func quoteShort(s string) string {
	if looksLikeKey(s) {
		return "(a key)"
	}
	if len(s) > 40 {
		return strconv.Quote(s[:40]) + "..."
	}
	return strconv.Quote(s)
}

// looksLikeKey reports whether s holds a run of 43 or more base64 characters,
// the length of a 32-byte key's base64 form without its padding.
func looksLikeKey(s string) bool {
	run := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '+' || c == '/' {
			if run++; run >= 43 {
				return true
			}
		} else {
			run = 0
		}
	}
	return false
}

// isKeyName reports whether k can be echoed in a message as a key name: at
// most 32 letters, digits, '_' or '-'. Anything else may be key material
// pasted on a line of its own.
func isKeyName(k string) bool { return plainOf(k, "_-") }

// plainOf reports whether s is at most 32 ASCII letters, digits or bytes
// of extra.
func plainOf(s, extra string) bool {
	if len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(extra, c) >= 0) {
			return false
		}
	}
	return true
}

// keyHint adds to a bad key's error what the value looks like: a key in
// quotes, a key of the wrong length or with a stray character, a file
// name (wg-quick files hold the key itself), or what a key's String
// prints. It never shows the value: it may be most of a private key.
func keyHint(v string) string {
	if v == "(hidden)" {
		return " (\"(hidden)\" is what wg show and the String of a noise.PrivateKey or PresharedKey print in a key's place: write the key itself, as wg showconf or the key's Base64 gives it)"
	}
	// A key in quotes, as INI files of other programs and shell
	// assignments write values: wg(8) and wg-quick take the quotes as
	// part of the value. Its '/' made it "the name of a file" before.
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] && isBase64(v[1:len(v)-1]) {
		return " (without the quotes around it: wg(8) and wg-quick read a value as it stands, quotes included)"
	}
	// A key copied short or long (its '=' or a character lost) is base64
	// of about a key's length, '/' among its characters: not a file name.
	b64 := isBase64(v)
	nearKey := len(v) >= keyBase64Len-4 && len(v) <= keyBase64Len+4
	if b64 && len(v) != keyBase64Len && nearKey {
		return lengthHint(v)
	}
	// So is a key with a character or two pasted into it or beside it
	// (a '.', a no-break space), unless it reads as a path.
	if n := notBase64(v); !b64 && nearKey && n <= 2 && v[0] != '/' && !strings.HasSuffix(v, ".key") {
		return fmt.Sprintf(" (%d of its characters are not base64's, letters, digits, '+', '/' and '=' padding: copy the key as `wg genkey`, `wg pubkey` and `wg genpsk` print it)", n)
	}
	if strings.ContainsRune(v, '/') || strings.HasSuffix(v, ".key") {
		return " (the key itself goes here, as `wg genkey` prints it, not the name of a file holding it)"
	}
	if b64 && len(v) != keyBase64Len {
		return lengthHint(v)
	}
	return ""
}

// keyBase64Len is the length of a 32-byte key in base64, as wg(8) writes
// and reads it: 43 characters and one '=' of padding.
const keyBase64Len = 44

// lengthHint says how long a key is and how long v is (never v itself: it
// may be most of a private key).
func lengthHint(v string) string {
	return fmt.Sprintf(" (a key is %d characters of base64, the last one '=', as `wg genkey`, `wg pubkey` and `wg genpsk` print it; this one has %d: copy it whole)", keyBase64Len, len(v))
}

// notBase64 counts the characters (runes) of v that standard base64
// does not use.
func notBase64(v string) int {
	n := 0
	for _, c := range v {
		if !isBase64(string(c)) {
			n++
		}
	}
	return n
}

// isBase64 reports whether v is made of standard base64's characters
// alone: letters, digits, '+', '/' and '=' padding.
func isBase64(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '=') {
			return false
		}
	}
	return v != ""
}
