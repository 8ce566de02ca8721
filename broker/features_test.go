package broker_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

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
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	av.ClientSoftwareName, av.ClientSoftwareVersion = "test", "1"
	resp, err := cl.SeedBrokers()[0].Request(ctx, av)
	if err != nil {
		t.Fatal(err)
	}
	sf := resp.(*kmsg.ApiVersionsResponse).SupportedFeatures
	if len(sf) != 1 || sf[0].Name != rl.FeatureMetadataVersion || sf[0].MinVersion != int16(rl.MinLevel) || sf[0].MaxVersion != int16(rl.LatestLevel) {
		t.Fatalf("agent's ApiVersions supported features: %+v", sf)
	}

	down := kmsg.NewPtrUpdateFeaturesRequest()
	u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	u.Feature, u.MaxVersionLevel, u.UpgradeType = rl.FeatureMetadataVersion, 1, 2
	down.FeatureUpdates = append(down.FeatureUpdates, u)
	down.TimeoutMillis = 10000
	resp, err = cl.SeedBrokers()[0].Request(ctx, down)
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
