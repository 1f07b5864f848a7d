//go:build !linux

package memcache

import (
	"context"
	"errors"
)

// epollAvailable: the epoll event loops are Linux's; elsewhere gnet serves.
const epollAvailable = false

var errEpollUnavailable = errors.New(`memcache event loop "epoll" is Linux only; use "gnet"`)

type epollServer struct{}

func (s *Server) serveEpoll([][2]string) error { return errEpollUnavailable }

func (*epollServer) shutdown(context.Context) error { return nil }
