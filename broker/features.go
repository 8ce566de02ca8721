package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Finalized feature levels. A client asks a broker for them (ApiVersions,
// Kafka's DescribeFeatures): a broker reports the levels it supports and
// the cluster's finalized ones with their epoch. The finalized levels
// live in the controllers' log, of which the agent has no copy, and no
// control request carries them, so the agent reads them from the active
// controller's ApiVersions after every full UpdateMetadata it accepts:
//   - its catch-up when it is unfenced (its first full one);
//   - the one a new active controller sends every live broker;
//   - the one a change of a finalized level sends every live broker
//     (Controller.UpdateFeatures plans it, and the change is answered only
//     once the live brokers acknowledged it: read your writes).
//
// The read is done before the UpdateMetadata is answered; a failed one is
// tried again at the next heartbeat, and until then the levels last read
// are reported (none before the first read).

// finalizedFeatures is one reading of the finalized levels; never changed
// once stored.
type finalizedFeatures struct {
	epoch  int64
	levels []kmsg.ApiVersionsResponseFinalizedFeature
}

// features fills an ApiVersions answer: the levels this build reads
// (which an upgrade of the cluster's level asks of every broker whose
// registration does not carry them) and the finalized ones last read.
func (a *Agent) features(resp *kmsg.ApiVersionsResponse) {
	supportedFeatures(resp)
	if f := a.finalized.Load(); f != nil {
		resp.FinalizedFeatures = append(resp.FinalizedFeatures, f.levels...)
		resp.FinalizedFeaturesEpoch = f.epoch
	}
}

// readFinalizedFeatures asks the active controller for its ApiVersions
// and keeps the finalized levels it reports.
func (a *Agent) readFinalizedFeatures(ctx context.Context) error {
	if a.fwd == nil {
		return nil
	}
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "ctrlquorum", "1"
	resp, err := a.askController(ctx, req)
	if err != nil {
		return err
	}
	r := resp.(*kmsg.ApiVersionsResponse)
	if r.FinalizedFeaturesEpoch < 0 {
		// A controller of the release before feature levels: there is
		// nothing to report.
		return nil
	}
	f := &finalizedFeatures{epoch: r.FinalizedFeaturesEpoch, levels: r.FinalizedFeatures}
	for {
		old := a.finalized.Load()
		if old != nil && old.epoch > f.epoch {
			break // a newer reading was stored meanwhile
		}
		if a.finalized.CompareAndSwap(old, f) {
			break
		}
	}
	return nil
}
