package listener

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/controller"
	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
	"github.com/ctrlquorum/ctrlquorum/transport/sender"
)

// apiVersionsFeatures fills an ApiVersions answer's feature fields: the
// metadata.version levels this build reads, and the levels the cluster
// runs at as this voter's image has them (a log with no FeatureLevel
// record is at level 1), with the index of the last FeatureLevel record
// as the epoch.
func (l *Listener) apiVersionsFeatures(resp *kmsg.ApiVersionsResponse) {
	resp.SupportedFeatures = SupportedFeatures()
	var fin controller.DescribeFeatures
	l.node.FSM.View(func(im *fsm.Image) { fin = controller.FinalizedFeatures(im) })
	resp.FinalizedFeaturesEpoch = int64(fin.Epoch)
	for _, f := range fin.Finalized {
		ff := kmsg.NewApiVersionsResponseFinalizedFeature()
		ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = f.Name, int16(f.Level), int16(f.Level)
		resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
	}
}

// SupportedFeatures is rl.SupportedFeatures in ApiVersions' form, which
// the broker agent reports too.
func SupportedFeatures() []kmsg.ApiVersionsResponseSupportedFeature {
	var out []kmsg.ApiVersionsResponseSupportedFeature
	for _, r := range rl.SupportedFeatures() {
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = r.Name, int16(r.Min), int16(r.Max)
		out = append(out, sf)
	}
	return out
}

// updateFeatures maps UpdateFeatures onto Controller.UpdateFeatures. The
// controller decides; what it decides from beyond the image is gathered
// here: the levels each voter supports, and each registered broker whose
// registration does not carry them, asked with ApiVersions.
func (l *Listener) updateFeatures(ctx context.Context, req *kmsg.UpdateFeaturesRequest) *kmsg.UpdateFeaturesResponse {
	resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	fail := func(err error) *kmsg.UpdateFeaturesResponse {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return resp
	}
	if l.standby() {
		return fail(l.notController())
	}
	updates := make([]controller.FeatureUpdate, 0, len(req.FeatureUpdates))
	for _, u := range req.FeatureUpdates {
		t := controller.UpgradeType(u.UpgradeType)
		if req.Version == 0 {
			t = controller.Upgrade
			if u.AllowDowngrade {
				t = controller.SafeDowngrade
			}
		}
		updates = append(updates, controller.FeatureUpdate{Feature: u.Feature, Level: u.MaxVersionLevel, Type: t})
	}
	cctx, cancel := l.requestContext(ctx, req.TimeoutMillis)
	defer cancel()
	results, err := l.node.Controller.UpdateFeatures(cctx, updates, req.ValidateOnly, l.nodeFeatures(cctx))
	if err != nil {
		return fail(err)
	}
	for _, r := range results {
		if req.Version >= 2 {
			// Version 2 answers with one error for the request.
			if r.Err != nil && resp.ErrorCode == 0 {
				fail(r.Err)
			}
			continue
		}
		rr := kmsg.NewUpdateFeaturesResponseResult()
		rr.Feature, rr.ErrorCode, rr.ErrorMessage = r.Feature, errorCode(r.Err), errorMessage(r.Err)
		resp.Results = append(resp.Results, rr)
	}
	return resp
}

// nodeFeatures asks every voter of the raft configuration (at its
// listener, as DescribeQuorum finds it), and every
// registered broker whose registration does not carry its levels, which
// levels it supports, all at once.
func (l *Listener) nodeFeatures(ctx context.Context) []controller.NodeFeatures {
	var out []controller.NodeFeatures
	var addrs []string // where to ask out[i], "" when answered already
	add := func(n controller.NodeFeatures, addr string) {
		out, addrs = append(out, n), append(addrs, addr)
	}
	for _, q := range l.quorum() {
		if !q.voter {
			continue
		}
		n := controller.NodeFeatures{Voter: true, ID: q.id}
		addr := ""
		switch {
		case q.id == l.self:
			n.Supported = rl.SupportedFeatures()
		case !q.ok:
			n.Err = errors.New("neither its raft address nor the voters' listeners say where its listener is")
		default:
			addr = q.listener.addr()
		}
		add(n, addr)
	}
	l.node.FSM.View(func(im *fsm.Image) {
		for _, b := range im.Brokers() {
			if len(b.Features) > 0 {
				continue
			}
			n := controller.NodeFeatures{ID: b.ID}
			addr := ""
			if e, ok := sender.PlaintextEndpoint(b.Endpoints); ok {
				addr = net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port)))
			} else {
				n.Err = errors.New("it registered no plaintext endpoint to ask")
			}
			add(n, addr)
		}
	})
	var wg sync.WaitGroup
	for i, addr := range addrs {
		if addr == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i].Supported, out[i].Err = l.askFeatures(ctx, addr)
		}()
	}
	wg.Wait()
	return out
}

// askFeatures sends ApiVersions to a node's listener and returns the
// features it reports supporting (none from a build before feature
// levels).
func (l *Listener) askFeatures(ctx context.Context, addr string) ([]rl.FeatureRange, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.PeerTimeout)
	defer cancel()
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "ctrlquorum", "1"
	resp, err := callPeer(ctx, kafkaclient.Options{ClientID: probeClientID, Dial: l.cfg.Dial}, addr, req)
	if err != nil {
		return nil, err
	}
	av := resp.(*kmsg.ApiVersionsResponse)
	if err := kerr.ErrorForCode(av.ErrorCode); err != nil {
		return nil, err
	}
	var out []rl.FeatureRange
	for _, f := range av.SupportedFeatures {
		if f.MinVersion < 0 || f.MaxVersion < f.MinVersion {
			return nil, fmt.Errorf("it reports %s %d to %d", f.Name, f.MinVersion, f.MaxVersion)
		}
		out = append(out, rl.FeatureRange{Name: f.Name, Min: rl.Level(f.MinVersion), Max: rl.Level(f.MaxVersion)})
	}
	return out, nil
}
