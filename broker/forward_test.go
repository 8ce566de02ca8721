package broker_test

import (
	"context"
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ctrlquorum/ctrlquorum/broker"
	"github.com/ctrlquorum/ctrlquorum/internal/testkit"
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

// TestForwardGivesUpWhenTheClientGoes: a forwarded request whose client
// closes its connection is given up at once, not retried until its time
// is up: the client may have sent it again through another broker, and
// delivered late it would act after the client moved on (a DeleteTopics
// deleting the topic created again since). The controllers refuse every
// connection and the forward timeout is ten minutes, so only the client's
// going ends the forward within the wait.
func TestForwardGivesUpWhenTheClientGoes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	var logs testkit.Log
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: &logs})
	a := startAgent(t, broker.Config{BrokerID: 1, Controllers: []string{dead}, ForwardTimeout: 10 * time.Minute, Logger: logger})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := kafkaclient.Dial(ctx, a.Addr(), kafkaclient.Options{ClientID: "leaving-client"})
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TopicNames = []string{"t"}
	req.TimeoutMillis = 1000
	rctx, rcancel := context.WithCancel(ctx)
	answered := make(chan error, 1)
	go func() {
		_, err := conn.Request(rctx, req)
		answered <- err
	}()
	waitFor(t, "the agent forwarding the request", func() bool {
		return logs.Has("forwarding a request to the active controller", "DeleteTopics", "leaving-client")
	})
	if logs.Has("forwarding its request given up") {
		t.Fatal("the forward was given up while the client still waited")
	}
	rcancel() // the client gives up: its connection closes
	if err := <-answered; err == nil {
		t.Fatal("a request cut short by its context answered")
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	})
	waitFor(t, "the agent giving the forward up once its client had gone", func() bool {
		return logs.Has("the client closed its connection: forwarding its request given up", "DeleteTopics", "leaving-client")
	})
}
