package broker_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	rl "github.com/ctrlquorum/ctrlquorum/raftlog"
)

// TestAgentFeatures: an agent reports the feature levels it supports in
// its registration, which the image keeps (a new cluster is at the
// latest level, whose RegisterBroker carries them), and in ApiVersions;
// UpdateFeatures sent to it reaches the controller.
func TestAgentFeatures(t *testing.T) {
	c := newE2ECluster(t, 6*time.Second)
	c.startBrokers(1)
	_, brokers := c.image("")
	if len(brokers) != 1 || !reflect.DeepEqual(brokers[0].Features, rl.SupportedFeatures()) {
		t.Fatalf("registered broker's features: %+v", brokers)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.agents[1].Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sf := apiVersions(ctx, t, cl).SupportedFeatures
	if len(sf) != 1 || sf[0].Name != rl.FeatureMetadataVersion || sf[0].MinVersion != int16(rl.MinLevel) || sf[0].MaxVersion != int16(rl.LatestLevel) {
		t.Fatalf("agent's ApiVersions supported features: %+v", sf)
	}

	down := kmsg.NewPtrUpdateFeaturesRequest()
	u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	u.Feature, u.MaxVersionLevel, u.UpgradeType = rl.FeatureMetadataVersion, 1, 2
	down.FeatureUpdates = append(down.FeatureUpdates, u)
	down.TimeoutMillis = 10000
	resp, err := cl.SeedBrokers()[0].Request(ctx, down)
	if err != nil {
		t.Fatal(err)
	}
	ur := resp.(*kmsg.UpdateFeaturesResponse)
	msg := ""
	if ur.ErrorMessage != nil {
		msg = *ur.ErrorMessage
	}
	if ur.ErrorCode != kerr.InvalidUpdateVersion.Code || !strings.Contains(msg, "refusing to downgrade") {
		t.Fatalf("downgrade through a broker: %v %q", kerr.ErrorForCode(ur.ErrorCode), msg)
	}
}

// TestAgentReportsFinalizedFeatures: a broker reports the cluster's
// finalized metadata.version in ApiVersions, as a Kafka broker does (a
// client's DescribeFeatures asks a broker); it reads it from the active
// controller after its catch-up, and a change made through it is in its
// answer as soon as the change is answered (read your writes).
func TestAgentReportsFinalizedFeatures(t *testing.T) {
	c := newE2EClusterAt(t, 6*time.Second, rl.Level1)
	c.startBrokers(2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// finalized reads a broker's finalized metadata.version; ok is false
	// while it reports none.
	finalized := func(id int32) (level int16, epoch int64, ok bool) {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.agents[id].Addr()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		r := apiVersions(ctx, t, cl)
		if len(r.FinalizedFeatures) == 0 && r.FinalizedFeaturesEpoch == -1 {
			return 0, 0, false
		}
		if len(r.FinalizedFeatures) != 1 || r.FinalizedFeatures[0].Name != rl.FeatureMetadataVersion ||
			r.FinalizedFeatures[0].MinVersionLevel != r.FinalizedFeatures[0].MaxVersionLevel {
			t.Fatalf("broker %d's finalized features: %+v (epoch %d)", id, r.FinalizedFeatures, r.FinalizedFeaturesEpoch)
		}
		return r.FinalizedFeatures[0].MaxVersionLevel, r.FinalizedFeaturesEpoch, true
	}
	// Each broker reads the level after its catch-up, which may still be
	// on its way once it is unfenced.
	var before int64
	for id := int32(1); id <= 2; id++ {
		waitFor(t, fmt.Sprintf("broker %d reporting a finalized level", id), func() bool {
			_, _, ok := finalized(id)
			return ok
		})
		level, epoch, _ := finalized(id)
		if level != int16(rl.Level1) {
			t.Fatalf("broker %d reports metadata.version %d, want %d", id, level, rl.Level1)
		}
		before = max(before, epoch)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.agents[1].Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	res, err := kadm.NewClient(cl).UpdateFeatures(ctx, false, kadm.FeatureUpdate{Feature: rl.FeatureMetadataVersion,
		MaxVersionLevel: int16(rl.LatestLevel), UpgradeType: 1})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("upgrade through broker 1: %v", err)
	}
	for id := int32(1); id <= 2; id++ {
		level, epoch, _ := finalized(id)
		if level != int16(rl.LatestLevel) || epoch <= before {
			t.Fatalf("right after the upgrade, broker %d reports metadata.version %d at epoch %d; want %d past epoch %d", id, level, epoch, rl.LatestLevel, before)
		}
	}
}

// apiVersions asks the client's seed broker for its ApiVersions (v3,
// which carries the features).
func apiVersions(ctx context.Context, t *testing.T, cl *kgo.Client) *kmsg.ApiVersionsResponse {
	t.Helper()
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	av.ClientSoftwareName, av.ClientSoftwareVersion = "test", "1"
	resp, err := cl.SeedBrokers()[0].Request(ctx, av)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.ApiVersionsResponse)
}
