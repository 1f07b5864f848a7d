package e2e

import (
	"regexp"
	"strings"
	"testing"
)

// TestMetaConversation drives the meta protocol by hand, line by line, with the
// replies memcached documents in protocol.txt. It runs against memcached too,
// so every expectation below is memcached's own.
func TestMetaConversation(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		c := dialRaw(t, tg.addr)
		cas := regexp.MustCompile(`^HD c(\d+)\r\n$`)

		// ms / mg basics: flags returned in request order, opaque and key echoed.
		c.send("ms m:a 2 T0 F5 c\r\nhi\r\n")
		casA := c.readLineMatch(cas)[1]
		c.roundTrip("mg m:a v f t s k O123 c\r\n", "VA 2 f5 t-1 s2 km:a O123 c"+casA+"\r\nhi\r\n")
		c.roundTrip("mg m:a\r\n", "HD\r\n")
		c.roundTrip("mg m:a s v\r\n", "VA 2 s2\r\nhi\r\n")
		c.roundTrip("mg m:none v\r\n", "EN\r\n")
		c.roundTrip("mg m:none v k Oab\r\n", "EN km:none Oab\r\n")

		// Quiet gets say nothing on a miss; mn ends the pipeline.
		c.roundTrip("mg m:none v q\r\nmg m:a v q k\r\nmg m:none2 v q\r\nmn\r\n", "VA 2 km:a\r\nhi\r\nMN\r\n")

		// Modes: add, replace, append, prepend, set.
		c.roundTrip("ms m:a 1 ME\r\nx\r\n", "NS\r\n")
		c.roundTrip("ms m:b 1 MR\r\nx\r\n", "NS\r\n")
		c.roundTrip("ms m:a 1 MA\r\n>\r\n", "HD\r\n")
		c.roundTrip("ms m:a 1 MP\r\n<\r\n", "HD\r\n")
		c.roundTrip("mg m:a v\r\n", "VA 4\r\n<hi>\r\n")
		c.roundTrip("ms m:b 1 MA\r\nx\r\n", "NS\r\n")
		c.roundTrip("ms m:b 1 MS q\r\nx\r\nmn\r\n", "MN\r\n")

		// Compare-and-swap with C: EX on a stale cas, NF on a missing key.
		c.send("mg m:b c\r\n")
		casB := regexp.MustCompile(`^HD c(\d+)\r\n$`).FindStringSubmatch(c.readLine())
		if casB == nil {
			t.Fatal("no cas")
		}
		c.roundTrip("ms m:b 1 C1\r\ny\r\n", "EX\r\n")
		c.roundTrip("ms m:nob 1 C1\r\ny\r\n", "NF\r\n")
		c.roundTrip("ms m:b 1 C"+casB[1]+"\r\ny\r\n", "HD\r\n")
		c.roundTrip("mg m:b v\r\n", "VA 1\r\ny\r\n")

		// Arithmetic: autovivify with J, delta D, decrement mode, value and TTL.
		c.roundTrip("ma m:n\r\n", "NF\r\n")
		c.roundTrip("ma m:n N0 J10 v\r\n", "VA 2\r\n10\r\n")
		c.roundTrip("ma m:n D5 v\r\n", "VA 2\r\n15\r\n")
		c.roundTrip("ma m:n MD D100 v t\r\n", "VA 1 t-1\r\n0\r\n")
		c.roundTrip("ma m:n q\r\nmn\r\n", "MN\r\n")
		c.roundTrip("ma m:n D0 v\r\n", "VA 1\r\n1\r\n")
		c.roundTrip("ma m:a\r\n", "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n")

		// Delete: C compare, quiet, NF.
		c.roundTrip("md m:b C1\r\n", "EX\r\n")
		c.roundTrip("md m:b q\r\nmn\r\n", "MN\r\n")
		c.roundTrip("md m:b\r\n", "NF\r\n")
		c.roundTrip("md m:b k Ox\r\n", "NF km:b Ox\r\n")

		// Stale-while-revalidate: N vivifies and wins, R wins when the TTL runs
		// low, md I marks stale and the next reader wins.
		c.roundTrip("mg m:l N30 v t\r\n", "VA 0 t30 W\r\n\r\n")
		c.roundTripTTL("mg m:l N30 v t\r\n", "VA 0 t30 Z\r\n\r\n")
		c.roundTrip("ms m:l 3 T60\r\nnew\r\n", "HD\r\n")
		c.roundTripTTL("mg m:l v t h\r\n", "VA 3 t60 h0\r\nnew\r\n")
		c.roundTrip("mg m:l v h\r\n", "VA 3 h1\r\nnew\r\n")
		c.roundTrip("mg m:l v R30\r\n", "VA 3\r\nnew\r\n")
		c.roundTrip("mg m:l v R100\r\n", "VA 3 W\r\nnew\r\n")
		c.roundTrip("mg m:l v R100\r\n", "VA 3 Z\r\nnew\r\n")
		c.roundTrip("md m:l I T30\r\n", "HD\r\n")
		c.roundTripTTL("mg m:l v t\r\n", "VA 3 t30 X W\r\nnew\r\n")
		c.roundTrip("mg m:l v\r\n", "VA 3 Z X\r\nnew\r\n")
		c.roundTrip("ms m:l 3\r\nfix\r\n", "HD\r\n")
		c.roundTrip("mg m:l v\r\n", "VA 3\r\nfix\r\n")

		// A set with I and a cas older than the item's stores the value stale,
		// keeping the item's TTL and a recache token already handed out.
		c.roundTrip("ms m:s 3 T30\r\nmoo\r\n", "HD\r\n")
		c.roundTrip("md m:s I T30\r\n", "HD\r\n")
		c.roundTripTTL("mg m:s s t v\r\n", "VA 3 s3 t30 X W\r\nmoo\r\n")
		c.roundTrip("ms m:s 1 T90 C0\r\nf\r\n", "EX\r\n")
		c.roundTrip("ms m:s 1 I T90 C1\r\nf\r\n", "HD\r\n")
		c.roundTripTTL("mg m:s s t v\r\n", "VA 1 s1 t30 Z X\r\nf\r\n")
		// A set that stores nothing answers c with cas 0.
		c.roundTrip("ms m:s 1 c C1\r\nx\r\n", "EX c0\r\n")
		c.roundTrip("ms m:none 1 c MR\r\nx\r\n", "NS c0\r\n")
		c.roundTrip("ma m:none c\r\n", "NF\r\n")

		// TTL update with T, and u leaves the hit mark alone.
		c.roundTrip("ms m:t 1\r\nx\r\n", "HD\r\n")
		c.roundTrip("mg m:t T100 t\r\n", "HD t100\r\n")
		c.roundTripTTL("mg m:t t u h\r\n", "HD t100 h1\r\n")
		c.roundTrip("ms m:u 1\r\nx\r\n", "HD\r\n")
		c.roundTrip("mg m:u u h\r\n", "HD h0\r\n")
		c.roundTrip("mg m:u h\r\n", "HD h0\r\n")
		c.roundTrip("mg m:u h\r\n", "HD h1\r\n")

		// base64 keys: the key goes back encoded, marked b.
		c.roundTrip("ms Zm9vYmFy 3 b\r\nbin\r\n", "HD\r\n")
		c.roundTrip("mg Zm9vYmFy b v k\r\n", "VA 3 kZm9vYmFy b\r\nbin\r\n")
		c.roundTrip("get foobar\r\n", "VALUE foobar 0 3\r\nbin\r\nEND\r\n")

		// Errors: memcached's strings, and the connection goes on.
		c.roundTrip("mg m:a v v\r\n", "CLIENT_ERROR duplicate flag\r\n")
		c.roundTrip("mg m:a !\r\n", "CLIENT_ERROR invalid flag\r\n")
		c.roundTrip("mg m:a zz\r\n", "CLIENT_ERROR invalid flag\r\n")
		c.roundTrip("mg m:a Tx\r\n", "CLIENT_ERROR bad token in command line format\r\n")
		c.roundTrip("mg m:a O"+strings.Repeat("o", 32)+"\r\n", "CLIENT_ERROR opaque token too long\r\n")
		c.roundTrip("mg foo! b\r\n", "CLIENT_ERROR error decoding key\r\n")
		c.roundTrip("md m:a q q\r\n", "CLIENT_ERROR invalid or duplicate flag\r\n")
		c.roundTrip("ma m:a MX\r\n", "CLIENT_ERROR invalid mode for ma M token\r\n")
		c.roundTrip("ms m:a 2 MX\r\nhi\r\n", "CLIENT_ERROR invalid mode for ms M token\r\n")
		c.roundTrip("ms m:a 2 c c\r\nhi\r\n", "CLIENT_ERROR duplicate flag\r\n")
		c.roundTrip("mg "+strings.Repeat("k", 251)+" v\r\n", "CLIENT_ERROR bad command line format\r\n")
		c.roundTrip("mg m:a"+strings.Repeat(" k", 18)+"\r\n", "CLIENT_ERROR options flags are too long\r\n")
		c.roundTrip("ms m:a 2000000 T0\r\n"+strings.Repeat("z", 2000000)+"\r\n", "SERVER_ERROR object too large for cache\r\n")
		c.roundTrip("mg m:a v\r\n", "EN\r\n") // a refused set drops the old item
		c.roundTrip("mg\r\n", "ERROR\r\n")
		c.roundTrip("mn\r\n", "MN\r\n")
		c.expectSentinel()
	})
}

// TestMetaNewerFlags covers flags newer than the memcached in Debian (1.6.18):
// E (explicit cas), md x, ms N (append autovivify), mg C. Expectations follow
// memcached's current protocol.txt.
func TestMetaNewerFlags(t *testing.T) {
	s := startServer(t)
	c := dialRaw(t, s.memcacheAddr)
	c.roundTrip("ms e:a 1 E777 c\r\nx\r\n", "HD c777\r\n")
	c.roundTrip("mg e:a c v\r\n", "VA 1 c777\r\nx\r\n")
	c.roundTrip("mg e:a c v C777\r\n", "HD c777\r\n") // unchanged: no value
	c.roundTrip("mg e:a v C1\r\n", "VA 1\r\nx\r\n")
	c.roundTrip("md e:a C777 E900 I\r\n", "HD\r\n")
	c.roundTrip("mg e:a c\r\n", "HD c900 X W\r\n")
	c.roundTrip("md e:a x\r\n", "HD\r\n")
	c.roundTrip("mg e:a v f c\r\n", "VA 0 f0 c900\r\n\r\n")
	c.roundTrip("ms e:b 2 MA N20 s\r\naa\r\n", "HD s2\r\n")
	c.roundTrip("ms e:b 2 MA N20 s c E5\r\nbb\r\n", "HD s4 c5\r\n")
	c.roundTripTTL("mg e:b v t\r\n", "VA 4 t20\r\naabb\r\n")
	c.roundTrip("ma e:n N0 J5 E42 c v\r\n", "VA 1 c42\r\n5\r\n")
	c.roundTrip("ma e:n C1\r\n", "EX\r\n")
	c.roundTrip("ma e:n C42 T50 t v\r\n", "VA 1 t50\r\n6\r\n")
	// ms C I: an older cas still stores, marked stale.
	c.roundTrip("ms e:s 1 E100\r\n1\r\n", "HD\r\n")
	c.roundTrip("ms e:s 1 C50 I\r\n2\r\n", "HD\r\n")
	c.roundTrip("mg e:s v\r\n", "VA 1 X W\r\n2\r\n")
	c.roundTrip("ms e:s 1 C18446744073709551615 I\r\n3\r\n", "EX\r\n")
	c.send("me e:s\r\n")
	c.readLineMatch(regexp.MustCompile(`^ME e:s exp=-1 la=\d+ cas=\d+ fetch=yes cls=1 size=\d+\r\n$`))
	c.roundTrip("me e:none\r\n", "EN\r\n")
	c.expectSentinel()
}

// TestMetaBadInputIsolated: bad meta commands on one connection get
// memcached's errors there, while another connection's pipelined work and
// the items stored before are untouched.
func TestMetaBadInputIsolated(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		good := dialRaw(t, tg.addr)
		good.roundTrip("ms iso:keep 4 T0\r\nsafe\r\n", "HD\r\n")
		bad := dialRaw(t, tg.addr)
		bad.send("mg iso:keep v z\r\nmg iso:keep q q\r\nmg iso:keep O" + strings.Repeat("x", 40) + "\r\n" +
			"ms iso:other 3 MZ\r\nbad\r\nma iso:keep D-5\r\nms iso:other 2000000 T0\r\n" + strings.Repeat("z", 2000000) + "\r\n")
		good.roundTrip("mg iso:keep v\r\nmn\r\n", "VA 4\r\nsafe\r\nMN\r\n")
		bad.expect("CLIENT_ERROR invalid flag\r\n")
		bad.expect("CLIENT_ERROR duplicate flag\r\n")
		bad.expect("CLIENT_ERROR opaque token too long\r\n")
		bad.expect("CLIENT_ERROR invalid mode for ms M token\r\n")
		bad.expect("CLIENT_ERROR invalid or duplicate flag\r\n")
		bad.expect("SERVER_ERROR object too large for cache\r\n") // and its data swallowed
		bad.roundTrip("mn\r\n", "MN\r\n")
		good.roundTrip("mg iso:keep v\r\nmn\r\n", "VA 4\r\nsafe\r\nMN\r\n")
	})
}
