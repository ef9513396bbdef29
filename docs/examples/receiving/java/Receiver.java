// A webhookd receiver in Java: check the raw bytes (Standard Webhooks) with
// javax.crypto, then parse them with your JSON library. Java 11 or later:
// java Receiver.java
import com.sun.net.httpserver.HttpServer;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.Base64;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

public class Receiver {
    static final long TOLERANCE = 300; // seconds between webhook-timestamp and our clock

    static boolean verify(byte[] key, String id, String timestamp, String signatures, byte[] body)
            throws Exception {
        if (id == null || signatures == null || timestamp == null || !timestamp.matches("[0-9]{1,18}")) {
            return false;
        }
        if (Math.abs(System.currentTimeMillis() / 1000 - Long.parseLong(timestamp)) > TOLERANCE) {
            return false;
        }
        Mac mac = Mac.getInstance("HmacSHA256");
        mac.init(new SecretKeySpec(key, "HmacSHA256"));
        mac.update((id + "." + timestamp + ".").getBytes(StandardCharsets.UTF_8));
        byte[] expected = Base64.getEncoder().encode(mac.doFinal(body));
        // "v1,<base64>" per key, separated by spaces: two during a rotation.
        for (String signature : signatures.split(" ")) {
            if (signature.startsWith("v1,") && MessageDigest.isEqual(
                    signature.substring(3).getBytes(StandardCharsets.UTF_8), expected)) {
                return true;
            }
        }
        return false;
    }

    public static void main(String[] args) throws Exception {
        String secret = System.getenv("WEBHOOK_SECRET"); // the endpoint's "whsec_…"
        byte[] key = Base64.getDecoder().decode(secret.substring("whsec_".length()));
        int port = Integer.parseInt(System.getenv().getOrDefault("PORT", "8000"));
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 0);
        server.createContext("/", exchange -> {
            byte[] body = exchange.getRequestBody().readAllBytes(); // the raw bytes, exactly as signed
            var headers = exchange.getRequestHeaders();
            String id = headers.getFirst("webhook-id");
            boolean ok;
            try {
                ok = verify(key, id, headers.getFirst("webhook-timestamp"),
                        headers.getFirst("webhook-signature"), body);
            } catch (Exception e) {
                ok = false;
            }
            if (!ok) {
                System.out.println("rejected");
                exchange.sendResponseHeaders(401, -1);
            } else {
                // Parse body now, and process the event once per webhook-id.
                System.out.println("verified " + id);
                exchange.sendResponseHeaders(204, -1);
            }
            exchange.close();
        });
        server.start();
    }
}
