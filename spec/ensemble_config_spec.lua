-- Pure function: the client addresses of an ensemble's configuration (the
-- data of /zookeeper/config), as following the ensemble will apply them
-- (docs/design.md, section 18).  No server.
local core = require "zklock.core"

local hosts = core.config_hosts

describe("an ensemble's configuration", function()
  it("lists every member's client address, observers too, and the version",
    function()
      local data = table.concat({
        "server.1=127.0.0.1:2888:3888:participant;127.0.0.1:2181",
        "server.2=127.0.0.2:2888:3888:participant;127.0.0.2:2182",
        "server.4=127.0.0.4:2888:3888:observer;127.0.0.4:2184",
        "version=10000002a" }, "\n")
      local h, n, v = hosts(data)
      assert.equal("127.0.0.1:2181,127.0.0.2:2182,127.0.0.4:2184", h)
      assert.equal(3, n)
      assert.equal("10000002a", v)
    end)

  it("reads a missing or wildcard client host as the member's quorum host",
    function()
      local data = "server.1=zk1.example:2888:3888:participant;2181\n" ..
        "server.2=zk2.example:2888:3888:participant;0.0.0.0:2182\n" ..
        "server.3=[::1]:2888:3888:participant;[::]:2183\nversion=1"
      -- (IPv6 without brackets: the C client splits at the last ':')
      assert.equal("zk1.example:2181,zk2.example:2182,::1:2183",
        (hosts(data)))
    end)

  it("takes the first of several quorum addresses, and bracketed IPv6",
    function()
      local data = "server.1=10.0.0.1:2888:3888|10.1.0.1:2888:3888:" ..
        "participant;2181\nserver.2=h2:2888:3888;[fe80::2]:2182\nversion=2"
      assert.equal("10.0.0.1:2181,fe80::2:2182", (hosts(data)))
    end)

  it("takes the plaintext client address where a secure one follows it " ..
    "(ZooKeeper 3.9)", function()
    local data = "server.1=h1:2888:3888:participant;h1:2181;h1:2281\n" ..
      "server.2=h2:2888:3888:participant;2182 ;2282\nversion=5"
    assert.equal("h1:2181,h2:2182", (hosts(data)))
  end)

  it("leaves out members without a client address (a static clientPort)",
    function()
      local data = "server.1=h1:2888:3888:participant\n" ..
        "server.2=h2:2888:3888:participant;h2:2181\nversion=3"
      local h, n = hosts(data)
      assert.equal("h2:2181", h)
      assert.equal(1, n)
      -- none at all: nothing to follow (nil), and no error
      h, n = hosts("server.1=h1:2888:3888:participant\nversion=3")
      assert.is_nil(h)
      assert.equal(0, n)
    end)

  it("ignores group and weight lines, blanks and a trailing newline",
    function()
      local data = " server.1=h1:1:2:participant;h1:2181 \r\n\n" ..
        "group.1=1:2\nweight.1=1\nversion=4\n"
      local h, n, v = hosts(data)
      assert.equal("h1:2181", h)
      assert.equal(1, n)
      assert.equal("4", v)
    end)

  it("gives nothing for a standalone server's empty node", function()
    local h, n, v = hosts("")
    assert.is_nil(h)
    assert.equal(0, n)
    assert.equal("0", v)
  end)

  it("refuses the whole configuration when a line does not parse",
    function()
      for _, bad in ipairs({
        "server.1=h1:2888:3888:participant;h1:0",         -- port 0
        "server.1=h1:2888:3888:participant;h1:65536",     -- port too big
        "server.1=h1:2888:3888:participant;h1:21x",       -- not a number
        "server.1=h1:2888:3888:participant;",             -- no port
        "server.1=:2888:3888:participant;2181",           -- no quorum host
        "server.1=h1;2181",                               -- no quorum port
        "server.1=h1:1:2;fe80::1:2181",                   -- bare IPv6
        "server.1=h1:1:2;h 1:2181",                       -- a blank
        "server.1=h1:1:2;h1,h2:2181",                     -- a separator
        "server.1h1:1:2;2181",                            -- no '='
        "version=xyz", "version=", "version=12345678901234567",
        "server.1=h1:1:2;h1:2181\0",                      -- a NUL byte
      }) do
        local h, msg = hosts("server.9=h9:1:2:participant;h9:2189\n" .. bad)
        assert.is_nil(h, bad)
        assert.matches("does not parse", msg, 1, true)
      end
    end)

  it("raises an argument error for data that is not a string", function()
    assert.has_error(function() hosts(nil) end)
    assert.has_error(function() hosts({}) end)
  end)
end)
