// Package sarama runs IBM/sarama's ClusterAdmin against an in-process dev
// cluster (server/devcluster), bootstrapped at its brokers. It is a module
// of its own so that sarama and its dependencies stay out of the main
// module's go.mod; `make test` runs it.
package sarama
