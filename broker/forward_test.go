package broker_test

import (
	"context"
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/broker"
	"github.com/ctrlquorum/ctrlquorum/transport/kafkaclient"
)

// oneItem fills a request with one item of what it names, so that its
// answer has somewhere to carry an error.
func oneItem(req kmsg.Request) {
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic = "t"
		r.Topics = append(r.Topics, t)
	case *kmsg.DeleteTopicsRequest:
		r.TopicNames = []string{"t"}
		t := kmsg.NewDeleteTopicsRequestTopic()
		t.Topic = kmsg.StringPtr("t")
		r.Topics = append(r.Topics, t)
	case *kmsg.CreatePartitionsRequest:
		t := kmsg.NewCreatePartitionsRequestTopic()
		t.Topic, t.Count = "t", 2
		r.Topics = append(r.Topics, t)
	case *kmsg.CreateACLsRequest:
		r.Creations = append(r.Creations, kmsg.NewCreateACLsRequestCreation())
	case *kmsg.DeleteACLsRequest:
		r.Filters = append(r.Filters, kmsg.NewDeleteACLsRequestFilter())
	case *kmsg.DescribeConfigsRequest:
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
		r.Resources = append(r.Resources, rr)
	case *kmsg.AlterConfigsRequest:
		rr := kmsg.NewAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
		r.Resources = append(r.Resources, rr)
	case *kmsg.IncrementalAlterConfigsRequest:
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
		r.Resources = append(r.Resources, rr)
	case *kmsg.ElectLeadersRequest:
		t := kmsg.NewElectLeadersRequestTopic()
		t.Topic, t.Partitions = "t", []int32{0}
		r.Topics = append(r.Topics, t)
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name, d.Mechanism = "u", 1
		r.Deletions = append(r.Deletions, d)
	}
}

// hasCode reports whether any ErrorCode field of v, at any depth, is code.
func hasCode(v reflect.Value, code int16) bool {
	switch v.Kind() {
	case reflect.Pointer:
		return !v.IsNil() && hasCode(v.Elem(), code)
	case reflect.Slice:
		for i := range v.Len() {
			if hasCode(v.Index(i), code) {
				return true
			}
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if f.Name == "ErrorCode" && v.Field(i).Kind() == reflect.Int16 && int16(v.Field(i).Int()) == code {
				return true
			}
			if f.IsExported() && hasCode(v.Field(i), code) {
				return true
			}
		}
	}
	return false
}

// TestForwardWithoutAController: when no controller takes a forwarded
// request in its time, the client gets REQUEST_TIMED_OUT for everything
// its request named, for every API a broker forwards — never
// NOT_CONTROLLER, and never a closed connection.
func TestForwardWithoutAController(t *testing.T) {
	// A controller address where nothing listens.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	a := startAgent(t, broker.Config{BrokerID: 1, Controllers: []string{dead}, ForwardTimeout: 300 * time.Millisecond})
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for key, version := range kafkaclient.Forwardable() {
		req := kmsg.RequestForKey(key)
		req.SetVersion(version)
		oneItem(req)
		if f := reflect.ValueOf(req).Elem().FieldByName("TimeoutMillis"); f.IsValid() {
			f.SetInt(100)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := cl.SeedBrokers()[0].Request(ctx, req)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", kmsg.NameForKey(key), err)
		}
		if !hasCode(reflect.ValueOf(resp), kerr.RequestTimedOut.Code) {
			t.Errorf("%s answered without REQUEST_TIMED_OUT: %+v", kmsg.NameForKey(key), resp)
		}
		if hasCode(reflect.ValueOf(resp), kerr.NotController.Code) {
			t.Errorf("%s answered NOT_CONTROLLER", kmsg.NameForKey(key))
		}
	}
}
