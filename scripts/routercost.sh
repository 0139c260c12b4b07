#!/bin/sh
# routercost.sh [COUNT]: what the router work (TTL / hop limit decrement and
# ECN, fastpath/router.go) costs the 64-byte encrypt and decrypt paths, and
# what fragmenting a 1,500-byte packet costs beside a 1,420-byte one.
#
# It builds the fastpath test binary twice, with the router work and without
# it (build tag wgpio_norouter, fastpath/routerwork_off.go), runs the two
# interleaved COUNT times each (default 10) on one CPU, and compares them
# with benchstat. The bound (issue "Forward like a router"): the paths move
# by at most 3%. Run it on a quiet machine; the figures are ratios of runs
# taken side by side.
set -eu
cd "$(dirname "$0")/.."
count=${1:-10}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

benchstat=$(command -v benchstat || true)
if [ -z "$benchstat" ]; then
	GOBIN="$dir/bin" go install golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
	benchstat="$dir/bin/benchstat"
fi

go test -c -o "$dir/with.test" ./fastpath
go test -c -tags wgpio_norouter -o "$dir/without.test" ./fastpath

paths='Benchmark(Encrypt|Decrypt)Path/ip64$'
i=0
while [ "$i" -lt "$count" ]; do
	for b in without with; do
		"$dir/$b.test" -test.run '^$' -test.bench "$paths" -test.benchtime 200000x \
			-test.cpu 1 >>"$dir/$b.txt"
	done
	i=$((i + 1))
done
echo "# 64-byte paths, without the router work (old) against with it (new), $count interleaved runs each"
"$benchstat" -filter '.unit:(path-ns/pkt OR min-path-ns/pkt OR sec/op)' "$dir/without.txt" "$dir/with.txt"

i=0
while [ "$i" -lt "$count" ]; do
	"$dir/with.test" -test.run '^$' -test.bench 'BenchmarkFragmentPath' -test.benchtime 100000x \
		-test.cpu 1 >>"$dir/frag.txt"
	i=$((i + 1))
done
echo
echo "# fragmentation: 1,500-byte packets without DF (two fragments) beside 1,420-byte packets, per packet sent"
"$benchstat" -col /name -filter '.unit:(path-ns/pkt OR sec/op)' "$dir/frag.txt"
