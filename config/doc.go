// Package config reads wg-quick style configuration files, with wgpio's own
// settings in an extra [WGPIO] section, into a plain File value.
//
// The format is the one of wg(8) ("CONFIGURATION FILE FORMAT" in wg(8)) and
// wg-quick(8) ("CONFIGURATION" in wg-quick(8)): an INI-like text of
// [Interface], [Peer] and [WGPIO] sections holding "Key = Value" lines.
// Section and key names are case-insensitive; a '#' or ';' starts a comment
// that runs to the end of the line, also after a value (in a PreUp, PostUp,
// PreDown or PostDown command only a '#' that begins a word outside
// quotes, as the bash wg-quick hands it to reads it, which takes ';'
// between commands); blank lines and the
// spacing around '=' and commas do not matter. Lists are separated by
// commas: an Address or AllowedIPs line whose ';' comment starts with an
// address ("10.0.0.0/24; 10.0.1.0/24"), or whose items are separated by
// spaces alone, is an error, as wg(8) refuses both; so is an empty
// AllowedIPs item ("a,,b", or a ',' at an end) or an AllowedIPs line
// without a value, which wg(8) refuses too, where an Address list may
// have one, as wg-quick drops it.
//
// A File renders back to the same format (Marshal) and, for its WireGuard
// part, to the body of a UAPI "set=1" operation (UAPI; the cross-platform
// configuration protocol,
// https://www.wireguard.com/xplatform/#configuration-protocol), so that a
// gateway applies a file through the same code path as `wg setconf`.
//
//	[Interface]
//	PrivateKey = <base64, 32 bytes>     # required
//	ListenPort = 51820                  # 1-65535; absent: 51820 (fastpath), a random port (compat-mqtun);
//	                                    # required in compat mode
//	Address    = 10.0.0.1/24, fd00::1/64 # repeatable, comma list; bare IP = /32 or /128; unicast
//	MTU        = 1420                   # 68-65535 (1280+ with an IPv6 Address; below 1280 with IPv6 AllowedIPs: a Warning);
//	                                    # default 1420; Mode = fastpath refuses below 576 at start
//	FwMark     = 0x1234                 # off or 0-4294967295; reported (wg show), marks only in compat-mqtun
//	DNS, Table, PreUp, PostUp, PreDown, PostDown, SaveConfig:
//	                                    # accepted, kept, not acted on: a Warning each (SaveConfig = false: none)
//
//	[Peer]                              # repeatable
//	PublicKey    = <base64>             # required, unique
//	PresharedKey = <base64>
//	AllowedIPs   = 10.0.0.2/32, 0.0.0.0/0 # repeatable, comma list; none: a Warning
//	Endpoint     = 198.51.100.7:51820 | [2001:db8::7]:51820 | vpn.example.com:51820
//	PersistentKeepalive = 25 | off      # seconds, 0-65535; 0 = off
//
//	[WGPIO]                             # wgpio's own settings, all optional
//	Mode        = fastpath | compat | compat-mqtun # default fastpath
//	WAN         = eth0                  # interface names
//	LAN         = eth1                  # or eth1.100, a kernel VLAN device: its VLAN on eth1
//	WANVLAN     = 100                   # 1-4094: WAN on this 802.1Q VLAN of the trunk WAN
//	LANVLAN     = 200                   # 1-4094: LAN likewise (default: untagged)
//	AddressMode = shared | owned        # default shared
//	Queues      = 2                     # 1-256; default all the RX queues of the WAN or LAN, whichever has
//	                                    # fewer (compat: all of each side's; compat-mqtun: 1)
//	CPUs        = 0-1,3                 # 0-8191
//	HandshakeWorkers = 4                # 1-1024 handshake goroutines; default one per CPU
//	SourcePorts = 51820 | 51820-51835   # outer UDP source ports; default ListenPort alone
//	WANAddress  = 198.18.0.2/24         # owned mode only (then required)
//	LANAddress  = 198.19.0.1/24         # owned mode only (then required)
//	Gateway     = 198.18.0.1            # owned mode only: next-hop router, on WANAddress's prefix (IPv6: or its link-local address)
//	XDPMode     = auto | native | generic # default auto: native where the driver can, else generic
//	MetricsAddress = 127.0.0.1:9586     # host:port, port 1-65535; default none (no /metrics)
//	MetricsPeers = 1000 | off           # 1-1000000 or off: per-peer series only up to this many peers; default 1000
//	MSSClamp    = auto | off | 1360     # 536-65495: TCP SYN MSS clamp, both ways; auto = MTU − 40 (IPv4) / − 60 (IPv6);
//	                                    # default off
//	ICMPRate    = 1000 | off            # 1-1000000 ICMP errors per second, all destinations (Linux icmp_msgs_per_sec);
//	                                    # default 1000
//	ICMPBurst   = 50                    # 1-1000000 messages (Linux icmp_msgs_burst); default 50
//	ICMPDestInterval = 1000 | off       # 1-3600000 ms between errors to one destination after 6 (Linux
//	                                    # icmp_ratelimit); default 1000;
//	                                    # "fragmentation needed"/"packet too big" are never limited
//	ReplayWindow = auto | 8128 | 131008 # counters per session's replay window (fastpath); auto (default):
//	                                    # 8128, widened to 131008 on a second RX queue or deep reordering,
//	                                    # or wide from the start when the peer's last session needed it
//
// Keys that take one value may appear once per section; Address, AllowedIPs
// and the wg-quick hooks add up when repeated, as in wg-quick.
//
// # Errors
//
// Parse reads the whole file and reports every problem it finds, not only the
// first: the error it returns is one *Error or an errors.Join of several, each
// naming the file, the line and the key (see Error for the exact format).
// Secret values (private and pre-shared keys) never appear in a message.
// Problems that do not stop the gateway (keys wgpio ignores, a peer without
// AllowedIPs, AllowedIPs with host bits set) are File.Warnings instead.
//
// The package does no I/O beyond reading the file and, for an Endpoint given
// as a host name, one resolver call (Options.Resolve; tests inject their own,
// so they need no DNS). Resolution happens once, at parse time, like
// `wg setconf`; with the default resolver the file's names are looked up
// at once, each once, once the file is read (MaxResolving at a time, each
// within ResolveTimeout), where wg(8) looks them up one after another.
package config
