//go:build linux

package transport

import (
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// batchRing uses io_uring as a batch syscall: an epoll loop queues a turn's
// socket reads, or its held replies, and one io_uring_enter runs them all.
// Each operation is MSG_DONTWAIT on a non-blocking socket, so the kernel
// completes it inline, during the enter, with EAGAIN where it would block;
// nothing is left in flight, no buffer outlives the call, and epoll stays
// the loop's only waiter. The ring is used by one loop at a time (its
// goroutine), so it needs no lock; goroutines move between threads, which
// rules out IORING_SETUP_SINGLE_ISSUER.
type batchRing struct {
	fd      int
	sqTail  *uint32
	sqMask  uint32
	cqHead  *uint32
	cqTail  *uint32
	cqMask  uint32
	sqes    []uringSQE
	cqes    []uringCQE
	queued  uint32 // SQEs written since the last enter
	ran     uint64 // operations completed, for tests
	entries uint32
	broken  bool     // the kernel refused a run: every later run fails too
	mem     [][]byte // the mappings, for close
}

// uringSQE is struct io_uring_sqe (64 bytes).
type uringSQE struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	off         uint64
	addr        uint64
	len         uint32
	msgFlags    uint32
	userData    uint64
	bufIndex    uint16
	personality uint16
	spliceFdIn  int32
	addr3       uint64
	_           uint64
}

// uringCQE is struct io_uring_cqe (16 bytes, no CQE32).
type uringCQE struct {
	userData uint64
	res      int32
	flags    uint32
}

// uringParams is struct io_uring_params (120 bytes).
type uringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	_                                                                      [3]uint32
	sqOff                                                                  [10]uint32 // head tail mask entries flags dropped array resv1 user_addr(u64)
	cqOff                                                                  [10]uint32 // head tail mask entries overflow cqes flags resv1 user_addr(u64)
}

const (
	// The io_uring ABI below is the same on every architecture; the syscall
	// numbers are not (mips), so they come from x/sys.
	uringOpSend = 26
	uringOpRecv = 27

	uringEnterGetEvents = 1
	uringFeatSingleMmap = 1
	uringSetupCQSize    = 1 << 3
	uringSetupSubmitAll = 1 << 7 // a bad SQE does not stop the rest (5.18+)

	uringOffSQRing = 0
	uringOffCQRing = 0x8000000
	uringOffSQEs   = 0x10000000
)

// newBatchRing sets up a ring of entries submissions; it fails where the
// kernel lacks io_uring or a sandbox forbids it (Docker's default seccomp
// profile does), and the loop then makes one syscall per operation.
func newBatchRing(entries uint32) (*batchRing, error) {
	var p uringParams
	p.flags = uringSetupCQSize | uringSetupSubmitAll
	p.cqEntries = entries
	fd, _, errno := syscall.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, errno
	}
	r := &batchRing{fd: int(fd), entries: p.sqEntries}
	fail := func(err error) (*batchRing, error) { r.close(); return nil, err }
	sqSize := int(p.sqOff[6]) + int(p.sqEntries)*4 // array offset + array
	cqSize := int(p.cqOff[5]) + int(p.cqEntries)*int(unsafe.Sizeof(uringCQE{}))
	if p.features&uringFeatSingleMmap != 0 {
		sqSize = max(sqSize, cqSize)
		cqSize = sqSize
	}
	sq, err := syscall.Mmap(r.fd, uringOffSQRing, sqSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_POPULATE)
	if err != nil {
		return fail(err)
	}
	r.mem = append(r.mem, sq)
	cq := sq
	if p.features&uringFeatSingleMmap == 0 {
		if cq, err = syscall.Mmap(r.fd, uringOffCQRing, cqSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_POPULATE); err != nil {
			return fail(err)
		}
		r.mem = append(r.mem, cq)
	}
	sqeBytes, err := syscall.Mmap(r.fd, uringOffSQEs, int(p.sqEntries)*int(unsafe.Sizeof(uringSQE{})), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_POPULATE)
	if err != nil {
		return fail(err)
	}
	r.mem = append(r.mem, sqeBytes)
	r.sqTail = (*uint32)(unsafe.Pointer(&sq[p.sqOff[1]]))
	r.sqMask = *(*uint32)(unsafe.Pointer(&sq[p.sqOff[2]]))
	array := unsafe.Slice((*uint32)(unsafe.Pointer(&sq[p.sqOff[6]])), p.sqEntries)
	for i := range array {
		array[i] = uint32(i) // SQE i always sits at array slot i
	}
	r.cqHead = (*uint32)(unsafe.Pointer(&cq[p.cqOff[0]]))
	r.cqTail = (*uint32)(unsafe.Pointer(&cq[p.cqOff[1]]))
	r.cqMask = *(*uint32)(unsafe.Pointer(&cq[p.cqOff[2]]))
	r.cqes = unsafe.Slice((*uringCQE)(unsafe.Pointer(&cq[p.cqOff[5]])), p.cqEntries)
	r.sqes = unsafe.Slice((*uringSQE)(unsafe.Pointer(&sqeBytes[0])), p.sqEntries)
	return r, nil
}

func (r *batchRing) close() {
	for _, m := range r.mem {
		_ = syscall.Munmap(m)
	}
	r.mem = nil
	if r.fd >= 0 {
		_ = syscall.Close(r.fd)
		r.fd = -1
	}
}

// queueRecv queues a read of up to len(b) bytes from fd into b, reported
// to done under tag. b must stay reachable until the next run returns. A
// full ring runs what it holds first, reporting to done.
func (r *batchRing) queueRecv(fd int, b []byte, tag uint64, done func(tag uint64, res int32)) {
	r.queue(uringOpRecv, fd, b, tag, done)
}

// queueSend queues a write of b to fd, reported to done under tag. b must
// stay reachable and unchanged until the next run returns.
func (r *batchRing) queueSend(fd int, b []byte, tag uint64, done func(tag uint64, res int32)) {
	r.queue(uringOpSend, fd, b, tag, done)
}

func (r *batchRing) queue(op uint8, fd int, b []byte, tag uint64, done func(tag uint64, res int32)) {
	if r.queued == r.entries {
		r.run(done)
	}
	if r.broken {
		return // the owner gives the ring up after its run; nothing more goes in
	}
	tail := *r.sqTail // only this goroutine writes the tail
	r.sqes[tail&r.sqMask] = uringSQE{opcode: op, fd: int32(fd), addr: uint64(uintptr(unsafe.Pointer(&b[0]))),
		len: uint32(len(b)), msgFlags: unix.MSG_DONTWAIT | unix.MSG_NOSIGNAL, userData: tag}
	atomic.StoreUint32(r.sqTail, tail+1) // publishes the SQE to the kernel
	r.queued++
}

// run submits what is queued and calls done for each completion: res is
// the byte count, or a negative errno; done must not use the ring. Every
// operation completes during the enter (see batchRing); run returns only
// once each has been reported, so no buffer is left in the kernel's hands.
// ok is false if the kernel refused part of this batch or of an earlier
// one: what ran has been reported, and the owner gives the ring up (closing
// it discards what was not submitted).
func (r *batchRing) run(done func(tag uint64, res int32)) (ok bool) {
	if r.broken {
		return false
	}
	n := uintptr(r.queued)
	r.queued = 0
	submitted, completed := uintptr(0), uintptr(0)
	for completed < n {
		k, errno := uringEnter(r.fd, n-submitted, n-completed, uringEnterGetEvents)
		switch errno {
		case 0:
			submitted += k
		case syscall.EINTR:
		default:
			r.broken = true
			return false
		}
		head := *r.cqHead
		tail := atomic.LoadUint32(r.cqTail)
		for ; head != tail; head++ {
			c := &r.cqes[head&r.cqMask]
			done(c.userData, c.res)
			completed++
			r.ran++
		}
		atomic.StoreUint32(r.cqHead, head)
		if submitted < n && errno == 0 && k == 0 {
			r.broken = true // the kernel takes no more: give up rather than spin
			return false
		}
	}
	return true
}
