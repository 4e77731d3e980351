//go:build unix

package provider

import (
	"net"
	"syscall"
)

// alive reports whether an idle connection is still open and silent: the
// server may have closed it (keep-alive timeout) while it sat in the pool.
// One non-blocking peek, no goroutine watching the connection.
func alive(conn net.Conn) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	ok = false
	var buf [1]byte
	cerr := rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// EAGAIN: open and nothing to read, as an idle connection must be.
		// n == 0: the server closed it; n > 0: bytes nobody asked for.
		ok = n <= 0 && (err == syscall.EAGAIN || err == syscall.EWOULDBLOCK)
		return true
	})
	return cerr == nil && ok
}
