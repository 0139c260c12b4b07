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
	var doubled []string
	if strings.Contains(cmd, "$") {
		doubled = append(doubled, "each $ written $$")
	}
	if hasSpecifier(cmd) {
		doubled = append(doubled, "each % but %i's written %%")
	}
	if !strings.ContainsAny(cmd, ";|&<>$`()*?~{}") {
		why := "wgpio runs no commands (wg-quick runs them with bash); run it from " + unitKey + dropIn
		if len(doubled) > 0 {
			why += ", with " + strings.Join(doubled, " and ")
		}
		return why
	}
	if strings.ContainsAny(cmd, `'\`) {
		doubled = append(doubled, "its ' and \\ quoted as systemd.syntax(7) says (or put the command in a script and run that)")
	}
	why := "wgpio runs no commands (wg-quick runs them with bash) and systemd runs them without a shell, which this one needs; run it as " +
		unitKey + "/bin/bash -c '<the command>'" + dropIn
	if len(doubled) > 0 {
		why += ", with " + strings.Join(doubled, " and ")
	}
	return why
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

// hookValue is the value of raw, a hook line, as wg-quick reads it: up
// to a '#' alone, where other lines end at a ';' too. wg-quick strips
// "#..." from every line and hands the rest of a hook to bash, for which
// ';' separates commands ("iptables ...; iptables ..."): cut there, the
// kept Setting and the warning's advice would miss the later commands.
func hookValue(raw string) string {
	if i := strings.IndexByte(raw, '#'); i >= 0 {
		raw = raw[:i]
	}
	_, v, _ := strings.Cut(raw, "=")
	return strings.TrimSpace(v)
}
