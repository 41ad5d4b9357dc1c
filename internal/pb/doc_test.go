package pb

import "testing"

func TestDerivedPortStaysValid(t *testing.T) {
	cases := []struct{ http, offset, want int }{
		{9333, GRPCPortOffset, 19333},
		{55535, GRPCPortOffset, 65535},
		{55536, GRPCPortOffset, 45536},
		{60999, RaftPortOffset, 40999},
		{45535, RaftPortOffset, 65535},
		{0, GRPCPortOffset, 0},
	}
	for _, c := range cases {
		if got := DerivedPort(c.http, c.offset); got != c.want {
			t.Errorf("DerivedPort(%d, %d) = %d, want %d", c.http, c.offset, got, c.want)
		}
	}
	if a, err := GRPCAddress("127.0.0.1:60000"); err != nil || a != "127.0.0.1:50000" {
		t.Errorf("GRPCAddress = %q, %v", a, err)
	}
	if _, err := GRPCAddress("no-port"); err == nil {
		t.Error("GRPCAddress accepted an address without a port")
	}
}
