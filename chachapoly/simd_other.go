//go:build !amd64 || purego

package chachapoly

func detect() impl { return implGeneric }

func supported() []impl { return []impl{implGeneric} }

func sealSIMD(pkts []Packet, im impl) { sealGeneric(pkts) }

func openSIMD(pkts []Packet, ok []bool, im impl) { openGeneric(pkts, ok) }
