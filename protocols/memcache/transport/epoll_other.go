//go:build !linux

package transport

import (
	"context"
	"errors"
)

// EpollAvailable: the epoll event loops are Linux's; elsewhere gnet serves.
const EpollAvailable = false

var errEpollUnavailable = errors.New(`memcache event loop "epoll" is Linux only; use "gnet"`)

// Epoll is Linux's; elsewhere its Serve fails.
func Epoll(Options) Transport { return epollUnavailable{} }

// DefaultLoops is 1: there are no epoll loops here.
func DefaultLoops() int { return 1 }

type epollUnavailable struct{}

func (epollUnavailable) Serve(Handler, func()) error    { return errEpollUnavailable }
func (epollUnavailable) Shutdown(context.Context) error { return nil }
