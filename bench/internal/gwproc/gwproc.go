//go:build linux

package gwproc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is USER_HZ, the unit of utime and stime in /proc/<pid>/stat
// (100 on every Linux architecture Go supports).
const clockTick = 10 * time.Millisecond

// Proc is one running gateway process.
type Proc struct {
	Name string
	cmd  *exec.Cmd
	log  *os.File

	waitErr error
	exited  chan struct{}
}

// Start starts cmd, with its stdout and stderr going to logPath, in its own
// process group and with SIGKILL as its parent-death signal (so a rig that
// dies does not leave it running). The caller must call Stop.
func Start(name string, cmd *exec.Cmd, logPath string) (*Proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("gwproc: create log: %w", err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("gwproc: start %s: %w", name, err)
	}
	p := &Proc{Name: name, cmd: cmd, log: f, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Pid is the process id (the gateway's own: `ip netns exec` and taskset
// exec it in place).
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended, and how.
func (p *Proc) Exited() (bool, error) {
	select {
	case <-p.exited:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// WaitLog waits until the log holds want or timeout passes or the process
// exits.
func (p *Proc) WaitLog(want string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(p.log.Name())
		if bytes.Contains(b, []byte(want)) {
			return nil
		}
		if done, err := p.Exited(); done {
			return fmt.Errorf("gwproc: %s exited (%v): %s", p.Name, err, tail(b))
		}
		time.Sleep(20 * time.Millisecond)
	}
	b, _ := os.ReadFile(p.log.Name())
	return fmt.Errorf("gwproc: %s: no %q after %v: %s", p.Name, want, timeout, tail(b))
}

// Log returns the end of the process's output.
func (p *Proc) Log() string {
	b, _ := os.ReadFile(p.log.Name())
	return tail(b)
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// Stop sends SIGTERM to the process group, waits up to 3 s, then sends
// SIGKILL. Safe to call more than once.
func (p *Proc) Stop() error {
	pgid := p.cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(3 * time.Second):
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.exited
	}
	p.log.Close()
	return nil
}

// Usage is a snapshot of a process's cost.
type Usage struct {
	CPU         time.Duration // user + system time
	System      time.Duration // the system (kernel) part of CPU
	CtxSwitches uint64        // voluntary + involuntary, live threads
	Threads     int
}

// Sub returns u - o.
func (u Usage) Sub(o Usage) Usage {
	return Usage{CPU: u.CPU - o.CPU, System: u.System - o.System, CtxSwitches: u.CtxSwitches - o.CtxSwitches, Threads: u.Threads}
}

// Usage reads the process's CPU time and context switches.
func (p *Proc) Usage() (Usage, error) { return ReadUsage(p.Pid()) }

// ReadUsage reads the CPU time and context switches of process pid.
func ReadUsage(pid int) (Usage, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Usage{}, fmt.Errorf("gwproc: read stat: %w", err)
	}
	user, sys, err := ParseStatTimes(string(b))
	if err != nil {
		return Usage{}, err
	}
	u := Usage{CPU: user + sys, System: sys}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // the thread exited
		}
		u.CtxSwitches += ParseStatusSwitches(string(b))
		u.Threads++
	}
	return u, nil
}

// ParseStatCPU returns utime + stime of a /proc/<pid>/stat line.
func ParseStatCPU(stat string) (time.Duration, error) {
	user, sys, err := ParseStatTimes(stat)
	return user + sys, err
}

// ParseStatTimes returns utime and stime of a /proc/<pid>/stat line: the
// time the process ran its own code and the time the kernel ran for it
// (system calls, and softirq work that ran in its context).
func ParseStatTimes(stat string) (user, sys time.Duration, err error) {
	// The command name (field 2) may hold spaces and parentheses: fields
	// are counted after its closing parenthesis.
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, errors.New("gwproc: stat without command name")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("gwproc: stat has %d fields after the name, want at least 13", len(f))
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, fmt.Errorf("gwproc: stat times: %w", err)
	}
	return time.Duration(ut) * clockTick, time.Duration(st) * clockTick, nil
}

// ParseStatusSwitches returns voluntary_ctxt_switches +
// nonvoluntary_ctxt_switches of a /proc/<pid>/status text (0 if absent).
func ParseStatusSwitches(status string) uint64 {
	var n uint64
	sc := bufio.NewScanner(strings.NewReader(status))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "voluntary_ctxt_switches" && k != "nonvoluntary_ctxt_switches") {
			continue
		}
		x, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err == nil {
			n += x
		}
	}
	return n
}
