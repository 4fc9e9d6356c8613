package serve

import (
	"context"
	"time"

	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/serve/internal/pluginpb"
)

// metadataStoreServer serves an sdk.MetadataStore; watch.go has Watch.
type metadataStoreServer struct {
	pluginpb.UnimplementedMetadataStoreServer
	impl sdk.MetadataStore
}

func (s *metadataStoreServer) Get(ctx context.Context, req *pluginpb.GetRequest) (*pluginpb.GetResponse, error) {
	resp, err := s.impl.Get(ctx, &sdk.GetRequest{Key: req.Key})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.GetResponse{Kv: kvToPB(resp.KeyValue), Revision: resp.Revision}, nil
}

func (s *metadataStoreServer) List(ctx context.Context, req *pluginpb.ListRequest) (*pluginpb.ListResponse, error) {
	resp, err := s.impl.List(ctx, &sdk.ListRequest{Prefix: req.Prefix})
	if err != nil {
		return nil, toStatus(err)
	}
	out := &pluginpb.ListResponse{Revision: resp.Revision, Kvs: make([]*pluginpb.KeyValue, len(resp.KVs))}
	for i, kv := range resp.KVs {
		out.Kvs[i] = kvToPB(kv)
	}
	return out, nil
}

func (s *metadataStoreServer) Put(ctx context.Context, req *pluginpb.PutRequest) (*pluginpb.PutResponse, error) {
	resp, err := s.impl.Put(ctx, &sdk.PutRequest{Key: req.Key, Value: nonNilBytes(req.Value), ExpectVersion: req.ExpectVersion, Session: sdk.SessionID(req.Session)})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.PutResponse{Version: resp.Version}, nil
}

func (s *metadataStoreServer) Delete(ctx context.Context, req *pluginpb.DeleteRequest) (*pluginpb.DeleteResponse, error) {
	resp, err := s.impl.Delete(ctx, &sdk.DeleteRequest{Key: req.Key, ExpectVersion: req.ExpectVersion})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.DeleteResponse{Revision: resp.Revision}, nil
}

func (s *metadataStoreServer) Txn(ctx context.Context, req *pluginpb.TxnRequest) (*pluginpb.TxnResponse, error) {
	in := &sdk.TxnRequest{}
	for _, c := range req.Conditions {
		in.Conditions = append(in.Conditions, sdk.Condition{Key: c.Key, Version: c.Version})
	}
	for _, op := range req.Ops {
		o := sdk.Op{Type: sdk.OpType(op.Type), Key: op.Key, Session: sdk.SessionID(op.Session)}
		if o.Type == sdk.OpPut {
			o.Value = nonNilBytes(op.Value)
		}
		in.Ops = append(in.Ops, o)
	}
	resp, err := s.impl.Txn(ctx, in)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.TxnResponse{Revision: resp.Revision}, nil
}

func (s *metadataStoreServer) GrantSession(ctx context.Context, req *pluginpb.GrantSessionRequest) (*pluginpb.GrantSessionResponse, error) {
	resp, err := s.impl.GrantSession(ctx, &sdk.GrantSessionRequest{TTL: time.Duration(req.TtlNanos)})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.GrantSessionResponse{Id: int64(resp.ID), TtlNanos: int64(resp.TTL)}, nil
}

func (s *metadataStoreServer) KeepAlive(ctx context.Context, req *pluginpb.KeepAliveRequest) (*pluginpb.KeepAliveResponse, error) {
	resp, err := s.impl.KeepAlive(ctx, &sdk.KeepAliveRequest{ID: sdk.SessionID(req.Id)})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.KeepAliveResponse{TtlNanos: int64(resp.TTL)}, nil
}

func (s *metadataStoreServer) RevokeSession(ctx context.Context, req *pluginpb.RevokeSessionRequest) (*pluginpb.RevokeSessionResponse, error) {
	if _, err := s.impl.RevokeSession(ctx, &sdk.RevokeSessionRequest{ID: sdk.SessionID(req.Id)}); err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.RevokeSessionResponse{}, nil
}

func (s *metadataStoreServer) Compact(ctx context.Context, req *pluginpb.CompactRequest) (*pluginpb.CompactResponse, error) {
	c, ok := s.impl.(sdk.Compactor)
	if !ok {
		return nil, toStatus(errNoCompactor)
	}
	if _, err := c.Compact(ctx, &sdk.CompactRequest{Revision: req.Revision}); err != nil {
		return nil, toStatus(err)
	}
	return &pluginpb.CompactResponse{}, nil
}

func kvToPB(kv sdk.KeyValue) *pluginpb.KeyValue {
	return &pluginpb.KeyValue{Key: kv.Key, Value: kv.Value, Version: kv.Version, Session: int64(kv.Session)}
}

// kvFromPB restores a key. protobuf does not tell nil bytes from empty
// ones; a stored key's value is never nil.
func kvFromPB(kv *pluginpb.KeyValue) sdk.KeyValue {
	if kv == nil {
		return sdk.KeyValue{}
	}
	return sdk.KeyValue{Key: kv.Key, Value: nonNilBytes(kv.Value), Version: kv.Version, Session: sdk.SessionID(kv.Session)}
}

func nonNilBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
