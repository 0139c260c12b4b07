// Command _asm generates chachapoly's amd64 assembly with avo:
//
//	go run . -out ../chacha_amd64.s
//
// (run by go generate in the package directory).
package main

import . "github.com/mmcloughlin/avo/build"

func main() {
	ConstraintExpr("amd64,!purego")
	chacha16()
	chacha16x2()
	chachaKeys16()
	poly16()
	polyKeys16()
	chacha8()
	poly8()
	Generate()
}
