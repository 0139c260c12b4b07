package dataplane

import "errors"

// Errors of CopyFrame and SendCopy.
var (
	// ErrNoFreeFrame: the pool had no free frame.
	ErrNoFreeFrame = errors.New("dataplane: no free frame")
	// ErrFrameTooLong: the data does not fit in a frame after its headroom.
	ErrFrameTooLong = errors.New("dataplane: data longer than a frame")
	// ErrRingFull: the TX ring stayed full; the frame was freed.
	ErrRingFull = errors.New("dataplane: TX ring full")
)

// CopyFrame takes one free frame of tx's pool into buf[0] and copies data (a
// whole Ethernet frame) into it. buf is the caller's scratch, len(buf) >= 1;
// on success the caller owns buf[0], on error buf[0] is zero. data is not
// kept. The caller must own tx. It returns nil, ErrNoFreeFrame or
// ErrFrameTooLong.
func CopyFrame(tx TX, buf []Frame, data []byte) error {
	if tx.Alloc(buf[:1]) != 1 {
		buf[0] = Frame{}
		return ErrNoFreeFrame
	}
	if !buf[0].SetLen(len(data)) {
		tx.Free(buf[:1])
		buf[0] = Frame{}
		return ErrFrameTooLong
	}
	copy(buf[0].Data(), data)
	return nil
}

// TransmitRetry transmits frames on tx and, if the ring did not take them
// all, reclaims completions and tries once more. It returns how many frames
// tx took; the caller keeps frames[sent:] (to free and count them). The
// caller must own tx.
func TransmitRetry(tx TX, frames []Frame) (sent int) {
	sent = tx.Transmit(frames)
	if sent < len(frames) {
		tx.Reclaim()
		sent += tx.Transmit(frames[sent:])
	}
	return sent
}

// SendCopy sends one frame: a copy of data (a whole Ethernet frame) in a
// frame of tx's pool (CopyFrame), transmitted with one retry after reclaiming
// completions (TransmitRetry). buf is the caller's scratch, len(buf) >= 1,
// and buf[0] is zero on return; data is not kept. The caller must own tx.
// It returns nil, ErrNoFreeFrame, ErrFrameTooLong or ErrRingFull (the frame
// was freed): the caller counts the drop by its own reason. nil means that
// tx took the frame, not that it left: a frame tx drops on Transmit (one
// longer than the port's MTU plus its Ethernet header: DropTooLong; on
// memport, one to a closed peer: DropClosed) is counted in the port's Stats.
// ErrFrameTooLong is only data that no frame of the pool holds.
func SendCopy(tx TX, buf []Frame, data []byte) error {
	if err := CopyFrame(tx, buf, data); err != nil {
		return err
	}
	if TransmitRetry(tx, buf[:1]) != 1 {
		tx.Free(buf[:1])
		buf[0] = Frame{}
		return ErrRingFull
	}
	buf[0] = Frame{}
	return nil
}
