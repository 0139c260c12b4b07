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
	prefetch()
	Generate()
}

// prefetch issues PREFETCHT0 (all cache levels) for the address held in
// each element of lines, in order, without loading through any of them:
// the processor keeps the misses in flight together.
func prefetch() {
	// The Go declaration takes []unsafe.Pointer, which avo's signature
	// parser cannot name (no package unsafe in its scope); []*byte has
	// the same layout (a slice of 8-byte pointers), and go vet's asmdecl
	// checks the assembly against the Go declaration.
	TEXT("prefetch", NOSPLIT, "func(lines []*byte)")
	Doc("prefetch issues PREFETCHT0 for each address in lines (see prefetch_amd64.go).")
	p := Load(Param("lines").Base(), GP64())
	n := Load(Param("lines").Len(), GP64())
	TESTQ(n, n)
	JZ(LabelRef("done"))
	Label("loop")
	a := GP64()
	MOVQ(Mem{Base: p}, a)
	PREFETCHT0(Mem{Base: a})
	ADDQ(Imm(8), p)
	DECQ(n)
	JNZ(LabelRef("loop"))
	Label("done")
	RET()
}
