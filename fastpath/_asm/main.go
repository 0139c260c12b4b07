// Command _asm generates fastpath's amd64 assembly with avo:
//
//	go run . -out ../prefetch_amd64.s
//
// (run by go generate in the package directory; scripts/check-generate.sh
// checks that the committed file is reproduced).
package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

func main() {
	ConstraintExpr("amd64")
	prefetch("prefetch", "PREFETCHT0", PREFETCHT0)
	prefetch("prefetchL2", "PREFETCHT2", PREFETCHT2)
	cpuVendor()
	Generate()
}

// prefetch emits the function name, which issues the prefetch instruction
// op (mnemonic mn) for each address in lines, in order, four a turn
// while four are left, then one a turn, without loading through any of
// them: the processor keeps the misses in flight together. PREFETCHT0
// brings a line into every cache level; PREFETCHT2 into the L2 and
// beyond, not the L1 (see prefetch_amd64.go for which the look-aheads
// use).
func prefetch(name, mn string, op func(mem Op)) {
	TEXT(name, NOSPLIT, "func(lines []uintptr)")
	Doc(name + " issues " + mn + " for each address in lines (see prefetch_amd64.go).")
	p := Load(Param("lines").Base(), GP64())
	n := Load(Param("lines").Len(), GP64())
	CMPQ(n, Imm(4))
	JB(LabelRef(name + "_one"))
	Label(name + "_four")
	for k := 0; k < 4; k++ {
		a := GP64()
		MOVQ(Mem{Base: p, Disp: 8 * k}, a)
		op(Mem{Base: a})
	}
	ADDQ(Imm(32), p)
	SUBQ(Imm(4), n)
	CMPQ(n, Imm(4))
	JAE(LabelRef(name + "_four"))
	Label(name + "_one")
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))
	a := GP64()
	MOVQ(Mem{Base: p}, a)
	op(Mem{Base: a})
	ADDQ(Imm(8), p)
	DECQ(n)
	JMP(LabelRef(name + "_one"))
	Label(name + "_done")
	RET()
}

// cpuVendor emits cpuVendor, which returns what CPUID's leaf 0 leaves in
// EBX, EDX and ECX: the processor's vendor string, four bytes each, in
// that order ("Auth" "enti" "cAMD").
func cpuVendor() {
	TEXT("cpuVendor", NOSPLIT, "func() (b, d, c uint32)")
	Doc("cpuVendor returns CPUID leaf 0's EBX, EDX and ECX: the vendor string (see prefetch_amd64.go).")
	XORL(EAX, EAX)
	XORL(ECX, ECX)
	CPUID()
	Store(EBX, Return("b"))
	Store(EDX, Return("d"))
	Store(ECX, Return("c"))
	RET()
}
