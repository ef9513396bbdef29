# A webhookd receiver in Ruby: check the raw bytes (Standard Webhooks)
# with the standard library's OpenSSL, then parse them. Ruby 3 wants
# `gem install webrick` for the server (any Rack app works the same way:
# verify request.body.read).
require "base64"
require "json"
require "openssl"
require "webrick"

$stdout.sync = true
KEY = Base64.strict_decode64(ENV.fetch("WEBHOOK_SECRET").delete_prefix("whsec_"))
TOLERANCE = 5 * 60 # seconds between webhook-timestamp and our clock

def verify(headers, body)
  id, timestamp, signatures = headers["webhook-id"], headers["webhook-timestamp"], headers["webhook-signature"]
  raise "missing webhook headers" unless id && timestamp&.match?(/\A\d+\z/) && signatures
  raise "timestamp outside the tolerance" if (Time.now.to_i - timestamp.to_i).abs > TOLERANCE
  signed = "#{id}.#{timestamp}.".b + body.b
  expected = Base64.strict_encode64(OpenSSL::HMAC.digest("SHA256", KEY, signed))
  # "v1,<base64>" per key, separated by spaces: two during a rotation.
  matched = signatures.split(" ").any? do |signature|
    version, value = signature.split(",", 2)
    version == "v1" && OpenSSL.secure_compare(value.to_s, expected)
  end
  raise "no matching signature" unless matched
  JSON.parse(body)
end

server = WEBrick::HTTPServer.new(BindAddress: "127.0.0.1", Port: Integer(ENV.fetch("PORT", "8000")),
                                 AccessLog: [], Logger: WEBrick::Log.new($stderr, WEBrick::Log::WARN))
server.mount_proc "/" do |req, res|
  body = req.body || "" # the raw bytes, exactly as signed
  begin
    event = verify(req, body)
  rescue StandardError => e
    puts "rejected: #{e.message}"
    res.status = 401
    next
  end
  # Process the event once per webhook-id: it may come more than once.
  puts "verified #{req["webhook-id"]} #{event["type"]}"
  res.status = 204
end
trap("TERM") { server.shutdown }
server.start
