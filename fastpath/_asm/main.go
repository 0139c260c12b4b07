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
)

func main() {
	ConstraintExpr("amd64")
	prefetch("prefetch", "PREFETCHT0", PREFETCHT0)
	prefetch("prefetchL2", "PREFETCHT2", PREFETCHT2)
	Generate()
}

// prefetch emits the function name, which issues the prefetch instruction
// op (mnemonic mn) for the address held in each element of lines, in
// order, without loading through any of them: the processor keeps the
// misses in flight together. PREFETCHT0 brings a line into every cache
// level; PREFETCHT2 into the L2 and beyond, not the L1 (see
// prefetch_amd64.go for which the look-aheads use).
func prefetch(name, mn string, op func(mem Op)) {
	// The Go declaration takes []unsafe.Pointer, which avo's signature
	// parser cannot name (no package unsafe in its scope); []*byte has
	// the same layout (a slice of 8-byte pointers), and go vet's asmdecl
	// checks the assembly against the Go declaration.
	TEXT(name, NOSPLIT, "func(lines []*byte)")
	Doc(name + " issues " + mn + " for each address in lines (see prefetch_amd64.go).")
	p := Load(Param("lines").Base(), GP64())
	n := Load(Param("lines").Len(), GP64())
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))
	Label(name + "_loop")
	a := GP64()
	MOVQ(Mem{Base: p}, a)
	op(Mem{Base: a})
	ADDQ(Imm(8), p)
	DECQ(n)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
	RET()
}
