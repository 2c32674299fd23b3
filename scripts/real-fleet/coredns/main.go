// CoreDNS with only the plugins the cluster tier's Corefile uses (realfleet/src/node/addons.rs),
// selected at compile time as CoreDNS documents it: a main that imports coremain and the
// plugins it needs, and sets the server's directives. CoreDNS's own main imports every
// plugin, cloud providers' SDKs among them, and takes minutes longer to compile.
//
// Usage: as coredns (-conf FILE).
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// In the order of CoreDNS's plugin.cfg, which is the order a query passes through them.
var directives = []string{"reload", "ready", "health", "errors", "loadbalance", "cache", "kubernetes"}

func init() { dnsserver.Directives = directives }

func main() { coremain.Run() }
