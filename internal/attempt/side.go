package attempt

import (
	"fmt"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
)

// sideSend is the attempt of a Side call (send's, for x.Side).
func (x *Exec) sideSend(a *Attempt) (*provider.Result, error) {
	pc := provider.Call{ClientHeader: x.call.Header, Received: &a.bytes}
	if b := x.call.Behavior; b != nil && b.Debug {
		pc.Sent = a.noteSent
	}
	url, body := x.Side.Request(a.ep.Endpoint)
	res, err := x.r.d.Client.Post(a.ctx, a.ep.Endpoint, url, body, pc)
	if err != nil {
		return nil, err
	}
	u, err := x.Side.Answer(res.Body)
	if err != nil {
		return nil, &provider.Error{Kind: provider.KindProtocol, Endpoint: a.ep.ID, Err: fmt.Errorf("reading the answer: %w", err)}
	}
	res.Response = &llm.Response{Usage: u}
	return res, nil
}
