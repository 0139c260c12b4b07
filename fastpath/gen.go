package fastpath

// The amd64 assembly (prefetch_amd64.s) is generated from Go by avo; the
// generator is its own module in _asm, so this module does not depend on
// avo. scripts/check-generate.sh checks that the committed file is
// reproduced.
//go:generate sh -c "cd _asm && go run . -out ../prefetch_amd64.s"
