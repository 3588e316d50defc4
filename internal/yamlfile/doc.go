// Package yamlfile owns what Causeway's YAML files share, whatever they
// model: strict decoding of one document (unknown fields, an empty file and
// a second document refused; go-yaml's errors rewritten for an operator;
// the line of each entry of a top-level list, for messages), the error that
// lists every semantic problem of a file (InvalidError), and the watch that
// delivers every new valid version of a file while keeping the last good
// one when an edit is broken (WatchParsed). The models live with their
// components: the configuration server's file in pkg/nspd/configfile, the
// service load balancer's services file in pkg/servicelb.
package yamlfile
