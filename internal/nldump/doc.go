// Package nldump runs a netlink dump again when the kernel says it was
// interrupted. A dump (an interface's addresses, a routing table, the
// neighbours) is read in several messages, and when the table changes
// between two of them the kernel marks the reply NLM_F_DUMP_INTR: the
// result may miss entries or hold stale ones, and vishvananda/netlink
// returns it with netlink.ErrDumpInterrupted. Under churn (DHCP
// renumbering, duplicate address detection ending, keepalived moving an
// address, a routing daemon's updates) that is the common case, exactly
// when a follower re-reads; taken as a failure, the change the dump was
// for was dropped (an address change never followed) or the gateway
// refused to start. Linux only (netlink); on other systems the package
// holds this file alone.
package nldump
