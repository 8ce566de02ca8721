// Package tlsconfig turns certificate files into *tls.Config values for
// every mutually authenticated connection of a cluster: voter to voter
// (the raft stream layer), broker agents to the controller listener, the
// controller's senders to brokers, and clients to the Kafka listener.
//
// # Files and reloading
//
// A Reloader reads three PEM files: a CA bundle (one or more CA
// certificates), this node's certificate (leaf first, then any
// intermediates) and its private key. The configs it hands out look the
// material up at every handshake (GetConfigForClient on the server side,
// GetClientCertificate and VerifyConnection on the client side), so
// Reload — called by the binary on SIGHUP — makes every new handshake use
// the new files without a restart. Connections already open keep the
// session they negotiated. A reload whose files do not parse, whose key
// does not match the certificate, whose certificate has expired or does
// not chain to the new CA bundle, or that names a different identity than
// Options.Expect allows, is refused: the old material stays in use and
// the reason is logged.
//
// Both sides require and verify a certificate: a server config asks for a
// client certificate signed by the bundle (RequireAndVerifyClientCert), a
// client config verifies the server's chain against the bundle. Session
// resumption is off, so every connection is verified against the material
// loaded at the time it is made — removing a CA from the bundle and
// reloading locks out its certificates for new connections at once.
//
// # Identities
//
// A certificate names the node it belongs to with URI subject alternative
// names in the ctrlquorum scheme:
//
//	ctrlquorum://voter/1001    controller voter 1001 (raft server id "1001")
//	ctrlquorum://broker/2      data broker 2
//
// A node that is both a voter and a broker carries both names. The id is
// a non-negative decimal int32 written without sign or leading zeros.
// Any other URI in the ctrlquorum scheme (an unknown role, a malformed id,
// two different voter ids or two different broker ids in one certificate)
// makes the certificate name no identity at all: IdentityOf fails and
// every check that needs an identity refuses it. The subject common name
// is not an identity: it is free text (`voter-1001`, `broker-2`, `admin`
// in certificates made by `ctrlnode certs`) and becomes the client's
// principal (`User:<CN>`) for logging and, later, authorization. URI SANs
// were chosen over common names because they are typed (a hostname can
// never be mistaken for a node id) and a certificate can hold several.
//
// # Peer checks
//
// A PeerCheck decides whether the identity a peer's verified certificate
// names may take part in a connection: Voters accepts only configured
// voter ids (the raft stream layer uses it on both accept and dial),
// Broker accepts one broker id (a sender dialling broker 2 wants to reach
// broker 2, not any broker).
//
// # Throwaway PKI
//
// For development and test clusters, NewCA makes a CA and CA.Issue signs
// certificates with it. DirPKI keeps such a CA and the certificates it
// issued in a folder, named by VoterLeaf, BrokerLeaf, NodeLeaf and
// ClientLeaf (`ctrlnode certs`, `ctrlnode dev --tls`): a later Issue signs
// with the CA it finds there, and replaces existing files only when told
// to (a rotation). Production clusters bring their own PKI.
package tlsconfig
