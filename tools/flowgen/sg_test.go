package main

import "testing"

func TestSgFlagsRejectBadInput(t *testing.T) {
	for _, bad := range [][]string{
		{"-target", "nowhere", "-port", "5201"},
		{"-target", "198.19.1.2", "-port", "0"},
		{"-target", "198.19.1.2", "-port", "70000"},
		{"-target", "198.19.1.2", "-port", "5201", "-every", "0"},
		{"-target", "198.19.1.2", "-port", "5201", "-attempt", "-1"},
	} {
		if _, err := sgFlags("sg-knock", bad); err == nil {
			t.Errorf("sgFlags(%q) accepted", bad)
		}
	}
	a, err := sgFlags("sg-knock", []string{"-target", "198.19.1.2", "-port", "5301", "-every", "0.005", "-for", "10"})
	if err != nil || a.addr() != "198.19.1.2:5301" || seconds(a.every).Milliseconds() != 5 {
		t.Fatalf("sgFlags = %+v, %v", a, err)
	}
	if _, err := sgFlags("sg-serve", []string{"-ports", "5201,5301-5320"}); err != nil {
		t.Fatalf("sg-serve flags refused: %v", err)
	}
}
