package serve

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vltava/vltava/plugins/sdk"
)

// errorDomain marks the ErrorInfo detail that names an sdk sentinel.
const errorDomain = "vltava.sdk"

// sentinels maps each sdk sentinel to its wire reason and gRPC code. The
// reason, not the code, identifies the error on the far side.
var sentinels = []struct {
	err    error
	reason string
	code   codes.Code
}{
	{sdk.ErrNotFound, "NOT_FOUND", codes.NotFound},
	{sdk.ErrVersionMismatch, "VERSION_MISMATCH", codes.FailedPrecondition},
	{sdk.ErrSessionExpired, "SESSION_EXPIRED", codes.FailedPrecondition},
	{sdk.ErrCompacted, "COMPACTED", codes.OutOfRange},
	{sdk.ErrWatchOverflow, "WATCH_OVERFLOW", codes.ResourceExhausted},
	{sdk.ErrUnavailable, "UNAVAILABLE", codes.Unavailable},
	{sdk.ErrClosed, "CLOSED", codes.Aborted},
	{sdk.ErrInvalidArgument, "INVALID_ARGUMENT", codes.InvalidArgument},
	{sdk.ErrAuthenticationFailed, "AUTHENTICATION_FAILED", codes.Unauthenticated},
}

// toStatus encodes an implementation's error for the wire (server side).
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, context.Canceled):
		return withReason(codes.Canceled, err.Error(), "CANCELED", "")
	case errors.Is(err, context.DeadlineExceeded):
		return withReason(codes.DeadlineExceeded, err.Error(), "DEADLINE_EXCEEDED", "")
	}
	var ae *sdk.AuthenticationError
	if errors.As(err, &ae) {
		return withReason(codes.Unauthenticated, err.Error(), "AUTHENTICATION_FAILED", ae.Message)
	}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			return withReason(s.code, err.Error(), s.reason, "")
		}
	}
	return status.Error(codes.Unknown, err.Error())
}

func withReason(code codes.Code, msg, reason, clientMsg string) error {
	st := status.New(code, msg)
	info := &errdetails.ErrorInfo{Domain: errorDomain, Reason: reason}
	if clientMsg != "" {
		info.Metadata = map[string]string{"message": clientMsg}
	}
	if d, err := st.WithDetails(info); err == nil {
		st = d
	}
	return st.Err()
}

// remoteError is a plugin's error as seen by the host: its text, and the
// sentinel it matched in the plugin.
type remoteError struct {
	msg      string
	sentinel error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

// fromStatus decodes a call's error (client side). ctx is the caller's:
// when it has ended, its error is the answer, whatever the transport said.
func fromStatus(ctx context.Context, c Conn, err error) error {
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("serve: %s: %v: %w", c, err, sdk.ErrUnavailable)
	}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.Domain != errorDomain {
			continue
		}
		switch info.Reason {
		case "AUTHENTICATION_FAILED":
			return &sdk.AuthenticationError{Message: info.Metadata["message"]}
		case "CANCELED":
			return context.Canceled
		case "DEADLINE_EXCEEDED":
			return context.DeadlineExceeded
		}
		for _, s := range sentinels {
			if s.reason == info.Reason {
				return &remoteError{msg: st.Message(), sentinel: s.err}
			}
		}
	}
	switch st.Code() {
	case codes.DeadlineExceeded:
		return context.DeadlineExceeded
	case codes.Unavailable, codes.Canceled:
		// The transport failed: the process died or is restarting, or
		// the host closed the connection of a process it replaced (a
		// Canceled the caller's ctx did not cause).
		return fmt.Errorf("serve: %s: %s: %w", c, st.Message(), sdk.ErrUnavailable)
	}
	return fmt.Errorf("serve: %s: %s", c, st.Message())
}
