// Package replay implements WireGuard's anti-replay check on a window that
// adapts from the kernel's 8,128 counters to 131,008, using the bitmap ring
// of RFC 6479 ("IPsec Anti-Replay Algorithm without Bit Shifting").
//
// # Semantics
//
// The rules are those of the WireGuard whitepaper, section 5.4.6
// ("Subsequent Messages: Exchange of Data Packets"), and of the Linux
// kernel's and wireguard-go's replay counters; only the width differs. A
// counter is rejected if it is at or above the caller's limit (WireGuard uses
// [github.com/wgpio/wgpio/protocol.RejectAfterMessages]), if it was accepted
// before, or if it lies more than [WindowSize] below the highest counter
// accepted so far. A counter above the
// highest moves the window forward; a jump by more than the ring forgets
// everything behind it.
//
// # Width
//
// WireGuard's usual window is 127 blocks of 64 bits (8,128 counters,
// [NarrowWindowSize]). When several NIC RX queues decrypt one session, a
// queue that stalls for a moment falls tens of thousands of counters behind
// the others, and its packets, late but legitimate, would be rejected as too
// old. The wide window has 2048 blocks of 64 bits: 16 KiB per keypair, of
// which 2047 blocks (131,008 counters, [WindowSize]) are usable; the
// remaining block is the one RFC 6479 keeps partially filled so that moving
// the window only ever clears whole blocks.
//
// Most sessions (a phone, a laptop) arrive in order on one queue and never
// need more than the kernel's width, so a window's [Policy] is [Auto] by
// default: it starts narrow (1 KiB) and widens, once, on a counter
// accepted from a second queue or one accepted more than [WidenDepth]
// (half the narrow window) below the highest — never on a rejected
// counter. Both come before loss while the queues lag each other by less
// than the narrow window; a queue whose first counters of the session
// come further behind loses them, as the kernel's window does, until it
// catches up. Widening keeps the check exact: a
// floor is set at that moment below which nothing is accepted (the narrow
// ring may have forgotten those counters), and above it the wide ring knows
// every counter accepted. [Narrow] and [Wide] fix the width.
//
// # Authenticate first
//
// Check a counter only after the packet carrying it has been authenticated
// (the AEAD Open succeeded). The counter is sent in the clear: checking an
// unauthenticated counter would let anyone on the path move the window
// forward with one forged packet, after which every legitimate packet is
// "too old", or mark counters as seen so the real packets are dropped as
// replays. WireGuard's whitepaper (section 5.4.6) and RFC 6479 require the
// same order.
//
// # Forms
//
// [Window] has one owner and no lock. [SharedWindow] is the same window
// behind a mutex, for one keypair decrypted on several queues; its batch
// check takes the lock once per batch, so queues contend once per batch
// rather than once per packet; widening happens under that lock, in the
// call that finds the cause. Both zero values are empty Auto windows ready
// to use; SetPolicy chooses another policy. [Window.CheckBatchFrom] names
// the queue a batch came from (the queue cause); CheckBatch names none.
// [Window.CheckFrom] is CheckBatchFrom for one counter, with a path of its
// own for the usual message of an in-order session (the newest counter
// yet, from the window's first queue): a concentrator's bursts hold one
// message each of many sessions.
package replay
