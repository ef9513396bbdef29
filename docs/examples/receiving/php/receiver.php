<?php
// A webhookd receiver in PHP: check the raw bytes (Standard Webhooks) with
// hash_hmac, then parse them. Try it with: php -S 127.0.0.1:8000 receiver.php

const TOLERANCE = 300; // seconds between webhook-timestamp and our clock

function verify(string $key, string $id, string $timestamp, string $signatures, string $body): array
{
    if ($id === '' || !ctype_digit($timestamp) || $signatures === '') {
        throw new RuntimeException('missing webhook headers');
    }
    if (abs(time() - (int) $timestamp) > TOLERANCE) {
        throw new RuntimeException('timestamp outside the tolerance');
    }
    $expected = base64_encode(hash_hmac('sha256', "$id.$timestamp.$body", $key, true));
    // "v1,<base64>" per key, separated by spaces: two during a rotation.
    foreach (explode(' ', $signatures) as $signature) {
        [$version, $value] = array_pad(explode(',', $signature, 2), 2, '');
        if ($version === 'v1' && hash_equals($expected, $value)) {
            return json_decode($body, true, 512, JSON_THROW_ON_ERROR | JSON_BIGINT_AS_STRING);
        }
    }
    throw new RuntimeException('no matching signature');
}

$key = base64_decode(substr(getenv('WEBHOOK_SECRET'), strlen('whsec_'))); // the endpoint's "whsec_…"
$body = file_get_contents('php://input'); // the raw bytes, exactly as signed
try {
    $event = verify($key, $_SERVER['HTTP_WEBHOOK_ID'] ?? '', $_SERVER['HTTP_WEBHOOK_TIMESTAMP'] ?? '',
        $_SERVER['HTTP_WEBHOOK_SIGNATURE'] ?? '', $body);
} catch (Throwable $e) {
    file_put_contents('php://stdout', "rejected: {$e->getMessage()}\n");
    http_response_code(401);
    exit;
}
// Process the event once per webhook-id: it may come more than once.
file_put_contents('php://stdout', "verified {$_SERVER['HTTP_WEBHOOK_ID']} {$event['type']}\n");
http_response_code(204);
