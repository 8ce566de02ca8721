package listener

import (
	"net"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
)

// TestStandbyRedirects checks what a voter that is not the active
// controller answers: NOT_CONTROLLER for every mutation, the live brokers
// with a broker as controller in Metadata, the active node as controller
// in DescribeCluster of the controllers (listed with its address), and
// config changes forwarded to the active node. A client seeded with the
// standby alone then reaches the active controller by itself, through
// the brokers.
func TestStandbyRedirects(t *testing.T) {
	c := newTestCluster(t, clusterOpts{stable: true})
	c.startBrokers(3)
	active := c.stableActive(30 * time.Second).i
	sb := c.standbyIndex(active)
	sbAddr := c.listener(sb).Addr().String()
	ctx := ctxT(t)
	activeID := c.ids[active]
	waitFor(t, 10*time.Second, "the standby to know the leader", func() bool { return c.listener(sb).activeID() == activeID })

	t.Run("mutations", func(t *testing.T) {
		ct := kmsg.NewPtrCreateTopicsRequest()
		for _, name := range []string{"a", "b"} {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
			ct.Topics = append(ct.Topics, rt)
		}
		cp := kmsg.NewPtrCreatePartitionsRequest()
		cpt := kmsg.NewCreatePartitionsRequestTopic()
		cpt.Topic, cpt.Count = "a", 3
		cp.Topics = append(cp.Topics, cpt)
		el := kmsg.NewPtrElectLeadersRequest()
		elt := kmsg.NewElectLeadersRequestTopic()
		elt.Topic, elt.Partitions = "a", []int32{0}
		el.Topics = append(el.Topics, elt)
		hb := kmsg.NewPtrBrokerHeartbeatRequest()
		hb.BrokerID, hb.BrokerEpoch = 1, c.broker(1).epoch.Load()
		reg := kmsg.NewPtrBrokerRegistrationRequest()
		reg.BrokerID, reg.ClusterID = 9, testClusterID
		ap := kmsg.NewPtrAlterPartitionRequest()
		ap.BrokerID = 1
		ub := kmsg.NewPtrUnregisterBrokerRequest()
		ub.BrokerID = 1
		lr := kmsg.NewPtrListPartitionReassignmentsRequest()
		dq := kmsg.NewPtrDescribeQuorumRequest()
		dqt := kmsg.NewDescribeQuorumRequestTopic()
		dqt.Topic = metadataTopic
		dqt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
		dq.Topics = append(dq.Topics, dqt)

		dt := kmsg.NewPtrDeleteTopicsRequest()
		dtt := kmsg.NewDeleteTopicsRequestTopic()
		dtt.Topic = kmsg.StringPtr("a")
		dt.Topics = append(dt.Topics, dtt)
		pa := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		pat := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		pat.Topic = "a"
		pat.Partitions = []kmsg.AlterPartitionAssignmentsRequestTopicPartition{kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()}
		pa.Topics = append(pa.Topics, pat)

		cases := []standbyCase{
			{dt, func(r kmsg.Response) []int16 { return []int16{r.(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode} }},
			{pa, func(r kmsg.Response) []int16 { return []int16{r.(*kmsg.AlterPartitionAssignmentsResponse).ErrorCode} }},
			{ct, func(r kmsg.Response) (out []int16) {
				for _, t := range r.(*kmsg.CreateTopicsResponse).Topics {
					out = append(out, t.ErrorCode)
				}
				return out
			}},
			{cp, func(r kmsg.Response) []int16 { return []int16{r.(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode} }},
			{el, func(r kmsg.Response) []int16 {
				resp := r.(*kmsg.ElectLeadersResponse)
				return []int16{resp.ErrorCode, resp.Topics[0].Partitions[0].ErrorCode}
			}},
			{hb, func(r kmsg.Response) []int16 { return []int16{r.(*kmsg.BrokerHeartbeatResponse).ErrorCode} }},
			{reg, func(r kmsg.Response) []int16 { return []int16{r.(*kmsg.BrokerRegistrationResponse).ErrorCode} }},
			{ap, func(r kmsg.Response) []int16 { return []int16{r.(*kmsg.AlterPartitionResponse).ErrorCode} }},
			{ub, func(r kmsg.Response) []int16 { return []int16{r.(*kmsg.UnregisterBrokerResponse).ErrorCode} }},
			{lr, func(r kmsg.Response) []int16 { return []int16{r.(*kmsg.ListPartitionReassignmentsResponse).ErrorCode} }},
			{dq, func(r kmsg.Response) []int16 { return []int16{r.(*kmsg.DescribeQuorumResponse).ErrorCode} }},
		}
		for _, tc := range cases {
			tc.req.SetVersion(tc.req.MaxVersion())
			resp, err := call(ctx, sbAddr, "test", tc.req)
			if err != nil {
				t.Fatalf("%s: %v", kmsg.NameForKey(tc.req.Key()), err)
			}
			for _, code := range tc.codes(resp) {
				if code != kerr.NotController.Code {
					t.Errorf("%s: got %v, want NOT_CONTROLLER", kmsg.NameForKey(tc.req.Key()), kerr.ErrorForCode(code))
				}
			}
		}
		var found bool
		c.view(active, func(im *fsmImage) { found = im.TopicByName("a") != nil })
		if found {
			t.Fatal("the standby created a topic")
		}
	})

	t.Run("metadata names a broker, describe cluster the active controller", func(t *testing.T) {
		mreq := kmsg.NewPtrMetadataRequest()
		mreq.SetVersion(mreq.MaxVersion())
		resp, err := call(ctx, sbAddr, "test", mreq)
		if err != nil {
			t.Fatal(err)
		}
		md := resp.(*kmsg.MetadataResponse)
		if ids := metadataIDs(md); md.ControllerID != 1 || !slices.Equal(ids, []int32{1, 2, 3}) {
			t.Fatalf("metadata: brokers %v controller %d, want brokers [1 2 3] controller 1", ids, md.ControllerID)
		}
		want := c.peers[active]
		dreq := kmsg.NewPtrDescribeClusterRequest()
		dreq.SetVersion(dreq.MaxVersion())
		dreq.EndpointType = 2 // the controllers
		dresp, err := call(ctx, sbAddr, "test", dreq)
		if err != nil {
			t.Fatal(err)
		}
		dc := dresp.(*kmsg.DescribeClusterResponse)
		if dc.ControllerID != activeID || !slices.ContainsFunc(dc.Brokers, func(b kmsg.DescribeClusterResponseBroker) bool {
			return b.NodeID == activeID && b.Host == want.Host && b.Port == want.Port
		}) {
			t.Fatalf("describe cluster: controller %d brokers %+v", dc.ControllerID, dc.Brokers)
		}
	})

	t.Run("kadm seeded with the standby reroutes", func(t *testing.T) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(sbAddr))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		res, err := adm.CreateTopics(ctx, 2, 3, nil, "via-standby")
		if err != nil || res.Error() != nil {
			t.Fatalf("%v %v", err, res.Error())
		}
		c.view(active, func(im *fsmImage) {
			if im.TopicByName("via-standby") == nil {
				t.Error("the acknowledged topic is not in the active controller's image")
			}
		})
	})

	t.Run("config changes are forwarded", func(t *testing.T) {
		cl := c.client()
		if res, err := kadm.NewClient(cl).CreateTopics(ctx, 1, 1, nil, "cfg"); err != nil || res.Error() != nil {
			t.Fatalf("%v %v", err, res.Error())
		}
		inc := kmsg.NewPtrIncrementalAlterConfigsRequest()
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "cfg"
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Value = "retention.ms", kmsg.StringPtr("1234")
		rr.Configs = append(rr.Configs, cfg)
		inc.Resources = append(inc.Resources, rr)
		inc.SetVersion(inc.MaxVersion())
		resp, err := call(ctx, sbAddr, "test", inc)
		if err != nil {
			t.Fatal(err)
		}
		if ec := resp.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode; ec != 0 {
			t.Fatalf("forwarded alter: %v", kerr.ErrorForCode(ec))
		}
		c.view(active, func(im *fsmImage) {
			if v, _ := im.TopicByName("cfg").Config("retention.ms"); v != "1234" {
				t.Errorf("retention.ms = %q on the active controller after an acknowledged forward", v)
			}
		})
		// Legacy AlterConfigs too.
		alt := kmsg.NewPtrAlterConfigsRequest()
		ar := kmsg.NewAlterConfigsRequestResource()
		ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeTopic, "cfg"
		ac := kmsg.NewAlterConfigsRequestResourceConfig()
		ac.Name, ac.Value = "segment.ms", kmsg.StringPtr("5000")
		ar.Configs = append(ar.Configs, ac)
		alt.Resources = append(alt.Resources, ar)
		alt.SetVersion(alt.MaxVersion())
		resp, err = call(ctx, sbAddr, "test", alt)
		if err != nil {
			t.Fatal(err)
		}
		if ec := resp.(*kmsg.AlterConfigsResponse).Resources[0].ErrorCode; ec != 0 {
			t.Fatalf("forwarded legacy alter: %v", kerr.ErrorForCode(ec))
		}
		c.view(active, func(im *fsmImage) {
			cfgs := im.TopicByName("cfg").Configs
			if len(cfgs) != 1 || cfgs[0].Key != "segment.ms" || cfgs[0].Value != "5000" {
				t.Errorf("configs after a full replace: %+v", cfgs)
			}
		})

		// Without forwarding, the standby says NOT_CONTROLLER.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		nf, err := New(Config{Listener: ln, Node: c.node(sb), Peers: c.peers, NoForward: true})
		if err != nil {
			t.Fatal(err)
		}
		defer nf.Close()
		resp, err = call(ctx, nf.Addr().String(), "test", inc)
		if err != nil {
			t.Fatal(err)
		}
		if ec := resp.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode; ec != kerr.NotController.Code {
			t.Fatalf("without forwarding: %v", kerr.ErrorForCode(ec))
		}
		// A forwarded request is never forwarded again: a standby answers
		// an envelope NOT_CONTROLLER.
		resp, err = call(ctx, sbAddr, forwardClientID, kafkaclient.Envelope(inc, "test", "User:ANONYMOUS", nil))
		if err != nil {
			t.Fatal(err)
		}
		if ec := resp.(*kmsg.EnvelopeResponse).ErrorCode; ec != kerr.NotController.Code {
			t.Fatalf("re-forwarding: %v", kerr.ErrorForCode(ec))
		}
	})
}

// standbyCase is a request a standby must refuse: codes returns every
// error code of its response that must be NOT_CONTROLLER.
type standbyCase struct {
	req   kmsg.Request
	codes func(kmsg.Response) []int16
}

// TestLeaderNamesItselfOnlyOnceActive checks the window between raft
// leadership and an active controller: the leader's image may still miss
// entries its predecessor committed, so its DescribeCluster answer for
// the controllers names no controller (clients ask again) instead of
// presenting that image as the active controller's. Once the controller
// is active again it names itself, and its image holds what was
// committed before. Its Metadata names a live broker throughout, never
// a voter.
func TestLeaderNamesItselfOnlyOnceActive(t *testing.T) {
	c := newTestCluster(t, clusterOpts{stable: true})
	c.startBrokers(3)
	ctx := ctxT(t)
	_, adm := c.admin()
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "kept"); err != nil {
		t.Fatal(err)
	}
	// Each answer is taken from one leader in one term. If leadership
	// moved anyway, the check runs again from its start on the new leader;
	// the voter that lost it is left to its watcher, which deactivates a
	// controller whose voter lost leadership and activates one whose voter
	// gained it (unless it gained it back before the Deactivate here).
	const attempts = 5
	for attempt := 1; ; attempt++ {
		if attempt > attempts {
			t.Fatalf("leadership moved during each of %d attempts", attempts)
		}
		lead := c.stableActive(30 * time.Second)
		l, n := c.listener(lead.i), c.node(lead.i)
		n.Controller.Deactivate()
		idleMD := l.metadata(nil, kmsg.NewPtrMetadataRequest())
		dc := kmsg.NewPtrDescribeClusterRequest()
		dc.Version, dc.EndpointType = 1, 2
		idleDC := l.describeCluster(dc)
		if !c.raftHeld(lead.i, lead.term) {
			t.Logf("leadership of voter %d (term %d) moved while its controller was idle: again", c.ids[lead.i], lead.term)
			if n.Voter.IsLeader() {
				n.Controller.Activate()
			}
			continue
		}
		n.Controller.Activate()
		var moved bool
		waitFor(t, 30*time.Second, "the controller to be active again, or leadership to move", func() bool {
			if ok, _ := n.Controller.Active(); ok {
				return true
			}
			moved = !n.Voter.IsLeader() || n.Voter.Raft().CurrentTerm() != lead.term
			return moved
		})
		md := l.metadata(nil, kmsg.NewPtrMetadataRequest())
		activeDC := l.describeCluster(dc)
		if moved || !c.raftHeld(lead.i, lead.term) {
			t.Logf("leadership of voter %d (term %d) moved while its controller activated: again", c.ids[lead.i], lead.term)
			continue
		}
		if idleMD.ControllerID != 1 || md.ControllerID != 1 {
			t.Errorf("Metadata names controller %d while idle, %d once active, want the live broker 1 both times", idleMD.ControllerID, md.ControllerID)
		}
		if idleDC.ControllerID != -1 {
			t.Errorf("DescribeCluster from a leader whose controller is idle names controller %d, want -1", idleDC.ControllerID)
		}
		if activeDC.ControllerID != c.ids[lead.i] {
			t.Fatalf("an active controller names %d, want itself (%d)", activeDC.ControllerID, c.ids[lead.i])
		}
		if !slices.ContainsFunc(md.Topics, func(t kmsg.MetadataResponseTopic) bool { return t.Topic != nil && *t.Topic == "kept" }) {
			t.Errorf("the active controller's Metadata lacks the committed topic: %+v", md.Topics)
		}
		return
	}
}
