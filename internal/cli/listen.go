package cli

import (
	"errors"
	"fmt"
	"net"

	"github.com/spf13/pflag"
)

// addrFlags are a server's two addresses: --ip, what it tells others to dial
// (a host name or an IP; peers resolve a name each time they dial), and
// --ip.bind, what its listeners bind.
//
// --ip.bind defaults to --ip when --ip is an IP address: binding exactly the
// advertised address is what one machine wants (the default 127.0.0.1 keeps a
// `kelp server` off the network), and a literal address cannot go stale. When
// --ip is a host name the default is every interface (0.0.0.0): the name's
// address may change while the server runs (a container reconnected to its
// network gets a new one), and listeners bound to the old address would be
// unreachable until a restart.
type addrFlags struct {
	ip   string
	bind string
}

func (a *addrFlags) addFlags(fl *pflag.FlagSet, what string) {
	fl.StringVar(&a.ip, "ip", "127.0.0.1", "address others reach this "+what+" at: a host name or an IP (advertised; a name is never resolved by the server itself)")
	fl.StringVar(&a.bind, "ip.bind", "", "IP address the listeners bind (default: --ip when it is an IP address, all interfaces 0.0.0.0 when it is a host name)")
}

// bindIP checks both flags and returns the address to bind.
func (a addrFlags) bindIP() (string, error) {
	ip := net.ParseIP(a.ip)
	switch {
	case a.ip == "":
		return "", errors.New("--ip is empty: give the host name or IP others reach this server at")
	case ip != nil && ip.IsUnspecified():
		return "", fmt.Errorf("--ip %s is not an address others can dial: give a host name or IP, and --ip.bind=%s to listen on every interface", a.ip, a.ip)
	case a.bind != "":
		if net.ParseIP(a.bind) == nil {
			return "", fmt.Errorf("--ip.bind %q is not an IP address (a name would be resolved once and go stale)", a.bind)
		}
		return a.bind, nil
	case ip != nil:
		return a.ip, nil
	default:
		return "0.0.0.0", nil
	}
}
