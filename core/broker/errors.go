package broker

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/vltava/vltava/plugins/sdk"
)

// errorCode is a Kafka error code carried in a response.
type errorCode = int16

var (
	errInvalidTopic             = kerr.InvalidTopicException.Code
	errInvalidPartitions        = kerr.InvalidPartitions.Code
	errInvalidReplicationFactor = kerr.InvalidReplicationFactor.Code
	errInvalidConfig            = kerr.InvalidConfig.Code
	errTopicAlreadyExists       = kerr.TopicAlreadyExists.Code
	errUnknownTopicOrPartition  = kerr.UnknownTopicOrPartition.Code
	errKafkaStorage             = kerr.KafkaStorageError.Code
)

// storeErrorCode maps a metadata store failure to the Kafka code a client
// sees: a store that is down is retriable, anything else is not.
func storeErrorCode(err error) errorCode {
	switch {
	case errors.Is(err, sdk.ErrUnavailable), errors.Is(err, sdk.ErrClosed),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		// Down, or did not answer within the request's bound: the
		// outcome of a write is unknown, and the client may retry.
		return kerr.RequestTimedOut.Code
	case errors.Is(err, sdk.ErrVersionMismatch):
		// A concurrent change won; the client may retry.
		return kerr.ConcurrentTransactions.Code
	default:
		return kerr.UnknownServerError.Code
	}
}
