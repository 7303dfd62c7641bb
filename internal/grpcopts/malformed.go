package grpcopts

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	encproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// Malformed makes a gRPC server answer a request that is not a valid
// protobuf message of its method (garbage bytes, a truncated message, a
// string field that is not UTF-8) with INVALID_ARGUMENT, naming the
// message type and what is wrong with it. grpc-go answers such a request
// INTERNAL ("failed to unmarshal the received message"), which says the
// server failed, and writes that status itself before any handler or
// interceptor sees the error. So the server's codec (ServerOption) keeps
// the decoding error of a request of a service registered through
// Registrar instead of failing, and the service's handler, which reads
// the request through the codec, answers with it. Requests of other
// services fail in the codec as before.
type Malformed struct {
	// types are the full names of the request messages of the services
	// registered through Registrar.
	types sync.Map
	// failed holds, by the address of the message being decoded, the
	// error of a request the codec could not decode, until the handler
	// that asked for the message takes it.
	failed sync.Map
	codec  encoding.CodecV2
}

// NewMalformed returns a Malformed for one server.
func NewMalformed() *Malformed {
	return &Malformed{codec: encoding.GetCodecV2(encproto.Name)}
}

// ServerOption installs the codec on the server.
func (m *Malformed) ServerOption() grpc.ServerOption {
	return grpc.ForceServerCodecV2(malformedCodec{m})
}

// Registrar returns a registrar that registers services on r so that their
// undecodable requests are answered INVALID_ARGUMENT.
func (m *Malformed) Registrar(r grpc.ServiceRegistrar) grpc.ServiceRegistrar {
	return malformedRegistrar{r, m}
}

type malformedRegistrar struct {
	grpc.ServiceRegistrar
	m *Malformed
}

func (r malformedRegistrar) RegisterService(sd *grpc.ServiceDesc, impl any) {
	if fd, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(sd.ServiceName)); err == nil {
		if svc, ok := fd.(protoreflect.ServiceDescriptor); ok {
			for i := range svc.Methods().Len() {
				r.m.types.Store(svc.Methods().Get(i).Input().FullName(), true)
			}
		}
	}
	d := *sd
	d.Methods = make([]grpc.MethodDesc, len(sd.Methods))
	for i, md := range sd.Methods {
		h := md.Handler
		md.Handler = func(srv any, ctx context.Context, dec func(any) error, in grpc.UnaryServerInterceptor) (any, error) {
			return h(srv, ctx, func(v any) error { return r.m.taken(dec(v), v) }, in)
		}
		d.Methods[i] = md
	}
	d.Streams = make([]grpc.StreamDesc, len(sd.Streams))
	for i, s := range sd.Streams {
		h := s.Handler
		s.Handler = func(srv any, ss grpc.ServerStream) error { return h(srv, malformedStream{ss, r.m}) }
		d.Streams[i] = s
	}
	r.ServiceRegistrar.RegisterService(&d, impl)
}

// malformedStream answers, like the unary methods, a stream message that
// could not be decoded with INVALID_ARGUMENT.
type malformedStream struct {
	grpc.ServerStream
	m *Malformed
}

func (s malformedStream) RecvMsg(v any) error { return s.m.taken(s.ServerStream.RecvMsg(v), v) }

// taken returns err, or the decoding error the codec kept for v.
func (m *Malformed) taken(err error, v any) error {
	if err != nil {
		return err
	}
	if e, ok := m.failed.LoadAndDelete(v); ok {
		return e.(error)
	}
	return nil
}

type malformedCodec struct{ m *Malformed }

func (c malformedCodec) Name() string { return encproto.Name }

func (c malformedCodec) Marshal(v any) (mem.BufferSlice, error) { return c.m.codec.Marshal(v) }

func (c malformedCodec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.m.codec.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	pm, ok := v.(proto.Message)
	if !ok {
		return err
	}
	name := pm.ProtoReflect().Descriptor().FullName()
	if _, ok := c.m.types.Load(name); !ok {
		return err
	}
	proto.Reset(pm)
	c.m.failed.Store(v, malformedError(name, err))
	return nil
}

// malformedError is the INVALID_ARGUMENT answer to a request of type name
// that could not be decoded.
func malformedError(name protoreflect.FullName, err error) error {
	return status.Errorf(codes.InvalidArgument, "malformed request: the bytes received are not a valid %s message (%v): send the method's request message, encoded as protobuf (api/proto)", name, err)
}
