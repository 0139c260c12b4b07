//go:build linux

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/wgpio/wgpio/config"
	"github.com/wgpio/wgpio/dataplane/afxdp"
	"github.com/wgpio/wgpio/gateway/compatgw"
	"github.com/wgpio/wgpio/gateway/fastgw"
	"github.com/wgpio/wgpio/gateway/tunnelmtu"
)

// startError is the error `wgpio up` reports for err, a gateway's Start
// error in either mode: a tunnel MTU the start refused (tunnelmtu.MTUError)
// at the file's MTU line when it has one, a [WGPIO] setting the start
// refused (fastgw.SettingError, compatgw.SettingError) at its key's line
// (or its flag; ListenPort, a port in use, at [Interface]'s), else
// err with explain's fix.
func startError(f *config.File, err error) error {
	var mtuErr *tunnelmtu.MTUError
	if errors.As(err, &mtuErr) {
		if _, ok := f.Interface.Lines["MTU"]; ok {
			return keyError(f.Name, f.Interface.Lines, "MTU", "", mtuErr.Error())
		}
	}
	var fastErr *fastgw.SettingError
	var compatErr *compatgw.SettingError
	key, keyErr := "", error(nil)
	switch {
	case errors.As(err, &fastErr):
		key, keyErr = fastErr.Key, fastErr.Err
	case errors.As(err, &compatErr):
		key, keyErr = compatErr.Key, compatErr.Err
	}
	if keyErr != nil {
		if key == "ListenPort" {
			// [Interface]'s; left out of the file, its default.
			if _, ok := f.Interface.Lines[key]; !ok {
				return fmt.Errorf("%s: [Interface] ListenPort (left out: the default): %s", f.Name, keyErr)
			}
			return keyError(f.Name, f.Interface.Lines, key, "", keyErr.Error())
		}
		flag := map[string]string{"WAN": "wan", "LAN": "lan"}[key]
		return keyError(f.Name, f.WGPIO.Lines, key, flag, explain(keyErr).Error())
	}
	return explain(err)
}

// explain adds the fix to errors a new user meets first.
func explain(err error) error {
	switch {
	case errors.Is(err, afxdp.ErrXDPUnsupported):
		return fmt.Errorf("%w\n(try XDPMode = generic in [WGPIO], or Mode = compat-mqtun, which needs no XDP)", err)
	case errors.Is(err, afxdp.ErrMTUTooLarge):
		return fmt.Errorf("%w\n(lower the MTU as it says, or set XDPMode = generic in [WGPIO], which has no such limit)", err)
	case errors.Is(err, afxdp.ErrMemlock):
		if me := (*afxdp.MemlockError)(nil); errors.As(err, &me) {
			// Its own text gives the limit and the fixes; the fix
			// was given twice, on two lines.
			return fmt.Errorf("%w (docker: --ulimit memlock=-1)", afxdp.MemlockInTermsOf(err, memlockQueues))
		}
		return fmt.Errorf("%w\n(each queue's AF_XDP UMEM is locked memory: without CAP_IPC_LOCK, a non-root user's or a container's root, raise RLIMIT_MEMLOCK before the start (LimitMEMLOCK=infinity in systemd, --ulimit memlock=-1 for docker) or grant CAP_IPC_LOCK)", afxdp.MemlockInTermsOf(err, memlockQueues))
	case errors.Is(err, fs.ErrPermission) && strings.Contains(err.Error(), "/dev/net/tun"):
		return fmt.Errorf("%w\n(the exception TUN for the Address needs /dev/net/tun open to this user: mode 0666 as most distributions ship it)", err)
	}
	return err
}

// memlockQueues is how a user of the binary makes the AF_XDP UMEMs
// smaller: no key sets their frames (fastgw.Config.Frames,
// afxdp.Config.NumFrames), which follow the queues (fast path: 17,408
// frames of 4 KiB a queue, 68 MiB; compat mode: each port's own).
const memlockQueues = "run fewer queues, with Queues in [WGPIO] or -queues, each of 68 MiB of frames in fast-path mode"
