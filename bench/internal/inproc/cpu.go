//go:build linux

package inproc

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/encoding/protowire"
)

// pin restricts the process to cpus: GOMAXPROCS = len(cpus) and the
// affinity of every thread (threads made later inherit it from their
// creator). restore puts back what was there.
func pin(cpus []int) (restore func(), err error) {
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return nil, fmt.Errorf("inproc: read CPU affinity: %w", os.NewSyscallError("sched_getaffinity", err))
	}
	set.Zero()
	for _, c := range cpus {
		set.Set(c)
	}
	if err := setAll(&set); err != nil {
		setAll(&old)
		return nil, err
	}
	procs := runtime.GOMAXPROCS(len(cpus))
	return func() {
		runtime.GOMAXPROCS(procs)
		setAll(&old)
	}, nil
}

// setAll sets the affinity of every thread of the process.
func setAll(set *unix.CPUSet) error {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return fmt.Errorf("inproc: list threads: %w", err)
	}
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, set); err != nil && err != unix.ESRCH {
			return fmt.Errorf("inproc: pin thread %d: %w", tid, os.NewSyscallError("sched_setaffinity", err))
		}
	}
	return nil
}

// allowedCPUs lists the CPUs this process may run on.
func allowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("inproc: read CPU affinity: %w", os.NewSyscallError("sched_getaffinity", err))
	}
	var cpus []int
	for c := 0; c < 1024; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// processCPU is the process's user + system CPU time, ns
// (getrusage(RUSAGE_SELF): every thread, the kernel work charged to them
// included).
func processCPU() (int64, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("inproc: %w", os.NewSyscallError("getrusage", err))
	}
	return ru.Utime.Nano() + ru.Stime.Nano(), nil
}

// labelCPU reads a CPU profile (runtime/pprof's gzipped profile.proto,
// github.com/google/pprof/proto/profile.proto) and returns the sampled CPU
// time in ns per "<value of key1>/<value of key2>" ("" for a label a
// sample lacks).
func labelCPU(prof []byte, key1, key2 string) (map[string]int64, error) {
	zr, err := gzip.NewReader(bytes.NewReader(prof))
	if err != nil {
		return nil, fmt.Errorf("inproc: profile: %w", err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("inproc: profile: %w", err)
	}
	// Profile fields: 1 sample_type (ValueType: 1 type, 2 unit), 2 sample
	// (Sample: 1 location_id, 2 value, 3 label), 6 string_table. Label: 1
	// key, 2 str (string table indexes).
	type sample struct {
		values []int64
		labels [][2]int64
	}
	var (
		strs    []string
		types   []int64 // string index of each sample type's type
		samples []sample
	)
	err = fields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		switch num {
		case 1:
			return fields(v, func(n protowire.Number, _ protowire.Type, _ []byte, x uint64) error {
				if n == 1 {
					types = append(types, int64(x))
				}
				return nil
			})
		case 2:
			var s sample
			err := fields(v, func(n protowire.Number, t protowire.Type, w []byte, x uint64) error {
				switch n {
				case 2:
					if t == protowire.BytesType {
						for len(w) > 0 {
							y, m := protowire.ConsumeVarint(w)
							if m < 0 {
								return protowire.ParseError(m)
							}
							s.values = append(s.values, int64(y))
							w = w[m:]
						}
					} else {
						s.values = append(s.values, int64(x))
					}
				case 3:
					var l [2]int64
					err := fields(w, func(n protowire.Number, _ protowire.Type, _ []byte, x uint64) error {
						if n == 1 || n == 2 {
							l[n-1] = int64(x)
						}
						return nil
					})
					s.labels = append(s.labels, l)
					return err
				}
				return nil
			})
			samples = append(samples, s)
			return err
		case 6:
			strs = append(strs, string(v))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("inproc: profile: %w", err)
	}
	str := func(i int64) string {
		if i < 0 || int(i) >= len(strs) {
			return ""
		}
		return strs[i]
	}
	cpu := -1
	for i, t := range types {
		if str(t) == "cpu" {
			cpu = i
		}
	}
	out := map[string]int64{}
	if cpu < 0 {
		if len(samples) == 0 {
			return out, nil
		}
		return nil, fmt.Errorf("inproc: profile has no cpu sample type")
	}
	for _, s := range samples {
		if cpu >= len(s.values) {
			continue
		}
		var v1, v2 string
		for _, l := range s.labels {
			switch str(l[0]) {
			case key1:
				v1 = str(l[1])
			case key2:
				v2 = str(l[1])
			}
		}
		out[v1+"/"+v2] += s.values[cpu]
	}
	return out, nil
}

// fields calls fn for every field of protobuf message b: bytes-typed
// fields get their bytes, varint and fixed fields their value.
func fields(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		case protowire.Fixed32Type:
			var y uint32
			y, n = protowire.ConsumeFixed32(b)
			x = uint64(y)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := fn(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}
