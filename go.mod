module github.com/wgpio/wgpio

go 1.26.8

require (
	github.com/cilium/ebpf v0.22.0 // indirect
	github.com/gaissmai/bart v0.30.0 // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/vishvananda/netlink v1.3.1 // indirect
	github.com/vishvananda/netns v0.0.5 // indirect
	golang.org/x/crypto v0.59.0 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.zx2c4.com/wintun v0.0.0-20230126152724-0fa3db229ce2 // indirect
	golang.zx2c4.com/wireguard v0.0.0-20260522210424-ecfc5a8d5446 // indirect
)
