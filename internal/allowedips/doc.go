// Package allowedips follows a wireguard-go device's allowed IPs through
// the UAPI sets made to it (https://www.wireguard.com/xplatform/), so that
// a dataplane table kept in step with them changes by the difference a
// set made instead of by a whole read of the configuration (a UAPI get:
// 16 MB of text at 50,000 peers).
//
// Edit reads a set's body as wireguard-go reads it (io.TeeReader) and
// keeps the lines that move allowed IPs; Peers models the peers' allowed
// IPs (read whole from a get reply by GetWriter) and applies an Edit's
// operations as wireguard-go's IpcSetOperation applies them
// (device/uapi.go), returning the prefixes that entered and left the
// union of the allowed IPs. In WireGuard an allowed IP belongs to one
// peer (whitepaper §2, cryptokey routing): adding it to a peer takes it
// from the peer that had it, which changes who has it but not the union.
//
// Users: cmd/wgpio's compat-mqtun (the TUN's no_route table) and
// gateway/compatgw (the LAN's XDP prefix filter).
package allowedips
