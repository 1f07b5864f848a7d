package ndbclient

import (
	"errors"
	"fmt"
)

// Code is the canonical error class. Every driver maps its own errors onto these,
// and every front end maps these once onto its wire replies.
type Code uint8

const (
	CodeOK Code = iota
	CodeNotFound
	CodeDuplicate
	CodeConditionFailed
	CodeInvalidArgument
	CodeSchemaError
	CodeOverloaded
	CodeTemporary
	CodeUnknownResult
	CodeUnavailable
	CodeInternal
	// CodeOutOfMemory is Overloaded's sibling for a full store with eviction off:
	// memcached reports it distinctly ("SERVER_ERROR out of memory storing object").
	CodeOutOfMemory
	// CodeNotNumeric: an atomic add found a value that is not an unsigned number.
	CodeNotNumeric
	// CodeTooLarge: a value is longer than its column allows.
	CodeTooLarge
	// CodeStorage: the engine could not write the change to its data dir
	// (disk full, I/O error), so it did not apply it. Later writes work
	// again once the disk takes them.
	CodeStorage
	numCodes
)

var codeNames = [numCodes]string{
	"OK", "NotFound", "Duplicate", "ConditionFailed", "InvalidArgument", "SchemaError",
	"Overloaded", "Temporary", "UnknownResult", "Unavailable", "Internal", "OutOfMemory",
	"NotNumeric", "TooLarge", "Storage",
}

func (c Code) String() string {
	if c < numCodes {
		return codeNames[c]
	}
	return fmt.Sprintf("Code(%d)", uint8(c))
}

// NumCodes is the number of canonical codes, for metric label tables.
const NumCodes = int(numCodes)

// Error carries a canonical code plus the backend's own code and message for logs.
type Error struct {
	Code       Code
	NativeCode int    // e.g. NDB error code; 0 for the embedded engine
	Message    string // human-readable detail; never matched on
	// NotSent: a Temporary error of an op the driver refused to send (its
	// data node silent while it owes answers, or owed too many): nothing
	// was applied and nothing is owed, so the dispatcher tries it again
	// for up to notSentRetryFor, past MaxRetries.
	NotSent bool
}

func (e *Error) Error() string {
	if e.NativeCode != 0 {
		return fmt.Sprintf("%s: %s (native %d)", e.Code, e.Message, e.NativeCode)
	}
	return e.Code.String() + ": " + e.Message
}

// Is lets errors.Is(err, ndbclient.ErrNotFound) work on any *Error with that code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && t.NativeCode == 0 && t.Message == ""
}

// Sentinels for errors.Is and for drivers that have nothing to add. Allocation-free.
var (
	ErrNotFound        = &Error{Code: CodeNotFound}
	ErrDuplicate       = &Error{Code: CodeDuplicate}
	ErrConditionFailed = &Error{Code: CodeConditionFailed}
	ErrOverloaded      = &Error{Code: CodeOverloaded}
	ErrOutOfMemory     = &Error{Code: CodeOutOfMemory}
	ErrNotNumeric      = &Error{Code: CodeNotNumeric}
	ErrTooLarge        = &Error{Code: CodeTooLarge}
	ErrUnavailable     = &Error{Code: CodeUnavailable}
	// ErrAbandoned completes the ops of an abandoned batch that were never
	// sent (Batch.Abandon).
	ErrAbandoned = &Error{Code: CodeUnavailable, Message: "not sent: the client went away"}
)

// Errorf builds an *Error with a formatted message. Not for hot paths.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the canonical code of err: CodeOK for nil, CodeInternal for a
// non-ndbclient error.
func CodeOf(err error) Code {
	if err == nil {
		return CodeOK
	}
	if e, ok := err.(*Error); ok {
		// Every op's error is one, unwrapped: a miss asks here twice, and
		// errors.As cost a reflection walk and an allocation each time.
		return e.Code
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// Retryable reports whether an operation that failed with err may be sent again
// as it is. UnknownResult is not: the first attempt may have committed.
func Retryable(err error) bool { return CodeOf(err) == CodeTemporary }
