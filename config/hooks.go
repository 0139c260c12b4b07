package config

import "strings"

// hookWhy is the warning's reason for a wg-quick hook line (PreUp,
// PostUp, PreDown, PostDown) whose command is cmd: wgpio runs no
// commands, and the unit's directive unitKey (ExecStartPost=, ...) runs
// at the same moment of a start or stop.
//
// wg-quick hands each hook to bash (wg-quick(8): "executed by bash(1)";
// its execute_hooks evals the line after replacing %i with the
// interface's name), but systemd runs a command line without a shell
// (systemd.service(5), "Command lines": no redirection, pipes, '&' or
// other shell syntax; commands split only by a ';' that is a word of its
// own). The most common PostUp line, "iptables -A FORWARD -i %i -j
// ACCEPT; iptables -t nat -A POSTROUTING -o eth0 -j MASQUERADE", copied
// into ExecStartPost= as it stands runs one iptables with "ACCEPT;" and
// the rest as its arguments, which fails, and a failing ExecStartPost=
// fails the unit's start: so a command with shell syntax is told to go
// through /bin/bash -c, as wg-quick ran it. systemd also expands '%'
// specifiers and '$' variables itself (systemd.unit(5), "Specifiers";
// systemd.service(5): "$$" for a literal '$'): each must be doubled to
// reach bash as written, except %i, the instance's name, which the unit
// gives the gateway as its name (-name %i), as wg-quick's %i is.
func hookWhy(unitKey, cmd string) string {
	const dropIn = " in a drop-in of wgpio@.service (systemctl edit wgpio@NAME)"
	if cmd == "" {
		return "wgpio runs no commands, and this one is empty (wg-quick runs nothing for it): nothing to move"
	}
	var doubled []string
	if strings.Contains(cmd, "$") {
		doubled = append(doubled, "each $ written $$")
	}
	if hasSpecifier(cmd) {
		doubled = append(doubled, "each % but %i's written %%")
	}
	if strings.ContainsAny(cmd, `'\`) {
		doubled = append(doubled, "its ' and \\ quoted as systemd.syntax(7) says (or put the command in a script and run that)")
	}
	why := "wgpio runs no commands (wg-quick runs them with bash); run it from " + unitKey + dropIn
	if needsShell(cmd) {
		why = "wgpio runs no commands (wg-quick runs them with bash) and systemd runs them without a shell, which this one needs; run it as " +
			unitKey + "/bin/bash -c '<the command>'" + dropIn
	}
	if len(doubled) > 0 {
		why += ", with " + strings.Join(doubled, " and ")
	}
	return why
}

// needsShell reports whether cmd, a hook's command, needs bash to mean
// what it means to wg-quick: shell syntax (';', pipes, redirections,
// expansions, globs, '!', "[["), a first word that assigns a variable
// (FOO=1 cmd), or a first word that is a shell builtin with no program
// of its name (cd, export, source...), none of which systemd's command
// line knows (systemd.service(5), "Command lines").
func needsShell(cmd string) bool {
	if strings.ContainsAny(cmd, ";|&<>$`()*?~{}!") || strings.Contains(cmd, "[[") {
		return true
	}
	first, _, _ := strings.Cut(cmd, " ")
	if i := strings.IndexByte(first, '='); i > 0 && !strings.ContainsRune(first[:i], '/') {
		return true
	}
	switch first {
	case "cd", "export", "source", ".", "eval", "set", "unset", "alias", "umask", "ulimit", "trap", "exec", "read", "pushd", "popd", "shopt", "declare", "local":
		return true
	}
	return false
}

// hasSpecifier reports whether cmd holds a '%' that systemd would read
// as a specifier of its own, that is any '%' but the one of %i (wg-quick
// replaces %i alone; a "%%" there reaches bash as "%%").
func hasSpecifier(cmd string) bool {
	for i := 0; i < len(cmd); i++ {
		if cmd[i] == '%' && (i+1 == len(cmd) || cmd[i+1] != 'i') {
			return true
		}
		if cmd[i] == '%' {
			i++
		}
	}
	return false
}

// hookValue is the value of raw, a hook line, as wg-quick hands it to
// bash: everything after the '=', where other lines end at a '#' or ';'
// (wg-quick keeps a hook's text unstripped and bash ends the command at a
// comment; ';' separates its commands: "iptables ...; iptables ..."), and
// the comment bash would drop taken off: from a '#' that begins a word
// outside quotes (bash(1), "COMMENTS"), so that "--comment \"#wg\"" stays
// in the command and a trailing "# note" does not.
func hookValue(raw string) string {
	_, v, _ := strings.Cut(raw, "=")
	v = strings.TrimSpace(v)
	var quote byte
	wordStart := true
	for i := 0; i < len(v); i++ {
		c := v[i]
		if quote != 0 {
			if c == quote {
				quote = 0
			} else if c == '\\' && quote == '"' {
				i++
			}
			continue
		}
		switch {
		case c == '\\':
			i++
			wordStart = false
		case c == '\'' || c == '"':
			quote, wordStart = c, false
		case strings.IndexByte(" \t;&|()<>", c) >= 0: // blanks and metacharacters end a word
			wordStart = true
		case c == '#' && wordStart:
			return strings.TrimSpace(v[:i])
		default:
			wordStart = false
		}
	}
	return v
}
