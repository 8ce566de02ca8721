package listener

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/ctrlquorum/ctrlquorum/fsm"
	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// finalizedMetadataVersion asks a voter's listener with ApiVersions v3
// for the finalized metadata.version, and checks the supported range it
// reports.
func (c *testCluster) finalizedMetadataVersion(t *testing.T, cl *kgo.Client, voter int32) int16 {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.voterBroker(t, cl, voter).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	av := resp.(*kmsg.ApiVersionsResponse)
	if len(av.SupportedFeatures) != 1 || av.SupportedFeatures[0].Name != rl.FeatureMetadataVersion ||
		av.SupportedFeatures[0].MinVersion != 1 || av.SupportedFeatures[0].MaxVersion != int16(rl.LatestLevel) {
		t.Fatalf("voter %d supports %+v", voter, av.SupportedFeatures)
	}
	for _, f := range av.FinalizedFeatures {
		if f.Name == rl.FeatureMetadataVersion {
			return f.MaxVersionLevel
		}
	}
	t.Fatalf("voter %d reports no finalized metadata.version: %+v", voter, av.FinalizedFeatures)
	return 0
}

func updateFeaturesRequest(level int16, upgradeType int8, validateOnly bool) *kmsg.UpdateFeaturesRequest {
	req := kmsg.NewPtrUpdateFeaturesRequest()
	req.SetVersion(1)
	u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	u.Feature, u.MaxVersionLevel, u.UpgradeType = rl.FeatureMetadataVersion, level, upgradeType
	req.FeatureUpdates = append(req.FeatureUpdates, u)
	req.ValidateOnly = validateOnly
	return req
}

func (c *testCluster) updateFeatures(t *testing.T, cl *kgo.Client, req *kmsg.UpdateFeaturesRequest) kmsg.UpdateFeaturesResponseResult {
	t.Helper()
	resp := c.toControllerRetry(t, cl, req, func(r kmsg.Response) int16 { return r.(*kmsg.UpdateFeaturesResponse).ErrorCode }).(*kmsg.UpdateFeaturesResponse)
	if resp.ErrorCode != 0 || len(resp.Results) != 1 {
		t.Fatalf("UpdateFeatures: %v %v, %d results", kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage, len(resp.Results))
	}
	return resp.Results[0]
}

func wantRefused(t *testing.T, r kmsg.UpdateFeaturesResponseResult, words string) {
	t.Helper()
	msg := ""
	if r.ErrorMessage != nil {
		msg = *r.ErrorMessage
	}
	if r.ErrorCode != kerr.InvalidUpdateVersion.Code || !strings.Contains(msg, words) {
		t.Fatalf("got %v %q, want INVALID_UPDATE_VERSION mentioning %q", kerr.ErrorForCode(r.ErrorCode), msg, words)
	}
}

// TestUpdateFeatures: a cluster at metadata.version 1 reports it in
// ApiVersions; an upgrade is refused while a registered broker does not
// report the new level, and goes through once it does, after asking
// every voter; the new level reaches every voter's ApiVersions; a
// downgrade below it is refused.
func TestUpdateFeatures(t *testing.T) {
	c := newTestCluster(t, clusterOpts{bootstrapLevel: rl.Level1})
	c.active(30 * time.Second)
	// Results per feature are versions 0 and 1; version 2 is below.
	v1 := kversion.Stable()
	v1.SetMaxKeyVersion(57, 1)
	cl := c.client(kgo.MaxVersions(v1))
	for _, id := range c.ids {
		if l := c.finalizedMetadataVersion(t, cl, id); l != 1 {
			t.Fatalf("voter %d: finalized %d, want 1", id, l)
		}
	}
	b := c.startBroker(1)
	wantRefused(t, c.updateFeatures(t, cl, updateFeaturesRequest(2, 1, false)), "broker 1 supports metadata.version 1 to 1")

	b.features.Store(true) // the broker runs a build that reads level 2
	if r := c.updateFeatures(t, cl, updateFeaturesRequest(2, 1, true)); r.ErrorCode != 0 {
		t.Fatalf("validate-only upgrade: %v %v", kerr.ErrorForCode(r.ErrorCode), *r.ErrorMessage)
	}
	c.view(0, func(im *fsm.Image) {
		if im.Features().MetadataLevel() != rl.Level1 {
			t.Fatal("a validate-only upgrade changed the level")
		}
	})
	if r := c.updateFeatures(t, cl, updateFeaturesRequest(2, 1, false)); r.ErrorCode != 0 {
		t.Fatalf("upgrade: %v %v", kerr.ErrorForCode(r.ErrorCode), *r.ErrorMessage)
	}
	c.converged(30 * time.Second)
	for _, id := range c.ids {
		if l := c.finalizedMetadataVersion(t, cl, id); l != 2 {
			t.Fatalf("voter %d: finalized %d after the upgrade, want 2", id, l)
		}
	}
	wantRefused(t, c.updateFeatures(t, cl, updateFeaturesRequest(1, 2, false)), "refusing to downgrade")

	// Version 2 answers with the request's error alone.
	req := updateFeaturesRequest(1, 3, false)
	resp := c.toControllerRetry(t, c.client(), req, func(r kmsg.Response) int16 { return r.(*kmsg.UpdateFeaturesResponse).ErrorCode }).(*kmsg.UpdateFeaturesResponse)
	if resp.ErrorCode != kerr.InvalidUpdateVersion.Code || len(resp.Results) != 0 {
		t.Fatalf("v2 unsafe downgrade: %v, %d results", kerr.ErrorForCode(resp.ErrorCode), len(resp.Results))
	}
}
