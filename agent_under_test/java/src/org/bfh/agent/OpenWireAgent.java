package org.bfh.agent;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import javax.jms.Connection;
import javax.jms.DeliveryMode;
import javax.jms.JMSException;
import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.MessageProducer;
import javax.jms.Session;
import javax.jms.TextMessage;
import javax.jms.Topic;
import javax.net.ssl.TrustManagerFactory;
import org.apache.activemq.ActiveMQConnection;
import org.apache.activemq.ActiveMQConnectionFactory;
import org.apache.activemq.ActiveMQSession;
import org.apache.activemq.ActiveMQSslConnectionFactory;
import org.apache.activemq.command.ActiveMQTopic;
import org.apache.activemq.transport.TransportListener;
import org.apache.activemq.transport.failover.FailoverTransport;

/**
 * The agent contract (docs/agent-contract.md) over OpenWire with ActiveMQ's own failover transport.
 *
 * <p>{@code java -jar bfh-openwire-agent.jar --config C --workload W --log L}
 *
 * <p>Failover is entirely the client library's: every role (the publisher, each subscription) has
 * its own connection on {@code failover:(tcp://u1,tcp://u2,...)?randomize=false}, which walks
 * {@code mb.urls} in order, replays the connection's state (consumers, durable subscriptions) on
 * the broker it reaches, and re-sends a request that was in flight when the link died. The agent
 * only logs what the transport tells it (transportInterupted / transportResumed).
 */
public final class OpenWireAgent {
    static final int EXIT_CONFIG = 2;
    static final ObjectMapper JSON = new ObjectMapper();

    final Conf conf;
    final JsonNode workload;
    final String run;
    final String agent;
    final MessageLog log;
    final CountDownLatch stop = new CountDownLatch(1);
    final List<Role> roles = new ArrayList<>();

    OpenWireAgent(Conf conf, JsonNode workload, MessageLog log) {
        this.conf = conf;
        this.workload = workload;
        this.run = workload.get("run").asText();
        this.agent = workload.get("agent").asText();
        this.log = log;
    }

    // ---- one connection per role, with failover's events logged ----------------------------
    final class Role implements TransportListener {
        final String role;
        final ActiveMQConnection connection;
        String broker; // the mb.urls key of the current (or last) broker, null before the first
        boolean up;
        int connects;

        Role(String role, String clientId) throws JMSException {
            this.role = role;
            ActiveMQConnectionFactory f = conf.factory();
            connection = (ActiveMQConnection) f.createConnection(conf.username, conf.password);
            connection.addTransportListener(this);
            if (clientId != null) {
                connection.setClientID(clientId); // the first sync request: blocks until connected
            }
            connection.start();
            markUp();
        }

        synchronized void markUp() {
            if (up) {
                return;
            }
            URI uri = connectedUri();
            if (uri == null) {
                return;
            }
            up = true;
            broker = uri.getHost() + ":" + uri.getPort();
            log.write("connected", "broker", broker, "role", role, "reason", connects++ == 0 ? "initial" : "reconnect");
        }

        /** The broker this connection is on now (asked of the transport), else the last one. */
        synchronized String broker() {
            URI uri = connectedUri();
            return uri == null ? broker : uri.getHost() + ":" + uri.getPort();
        }

        /** Null while the transport has no broker: a send then waits inside the failover transport. */
        String brokerIfUp() {
            URI uri = connectedUri();
            return uri == null ? null : uri.getHost() + ":" + uri.getPort();
        }

        URI connectedUri() {
            FailoverTransport ft = connection.getTransport().narrow(FailoverTransport.class);
            return ft == null || !ft.isConnected() ? null : ft.getConnectedTransportURI();
        }

        @Override
        public void onCommand(Object command) {}

        @Override
        public void onException(IOException error) {}

        @Override
        public synchronized void transportInterupted() {
            if (up) {
                up = false;
                log.write("disconnected", "broker", broker, "role", role, "reason", "connection_lost: transport interrupted");
            }
        }

        @Override
        public void transportResumed() {
            markUp();
        }

        void close(String reason) {
            Thread t = new Thread(() -> {
                try {
                    connection.close();
                } catch (JMSException ignored) {
                    // closing a dead link: nothing to tell
                }
            });
            t.setDaemon(true);
            t.start();
            try {
                t.join(3000);
            } catch (InterruptedException ignored) {
                Thread.currentThread().interrupt();
            }
            synchronized (this) {
                if (up) {
                    up = false;
                    log.write("disconnected", "broker", broker, "role", role, "reason", reason);
                }
            }
        }
    }

    String clientId(String role) {
        String raw = String.join("-", conf.clientIdPrefix, run, agent, role).replaceAll("^-+", "");
        return raw.replaceAll("[^A-Za-z0-9_-]", "_");
    }

    // ---- subscribers -------------------------------------------------------------------------
    void subscribe(int index, JsonNode sub) throws JMSException {
        String filter = sub.get("topic").asText();
        int qos = sub.path("qos").asInt(1);
        boolean durable = sub.path("durable").asBoolean(true) && qos >= 1;
        String cid = clientId("s" + index);
        Role r = new Role("subscriber:" + filter, cid);
        synchronized (roles) {
            roles.add(r);
        }
        int ack = qos >= 1 ? ActiveMQSession.INDIVIDUAL_ACKNOWLEDGE : Session.AUTO_ACKNOWLEDGE;
        Session session = r.connection.createSession(false, ack);
        Topic topic = new ActiveMQTopic(destination(filter));
        // the consumer's ConsumerInfo is a sync request: it returns once the broker has it
        MessageConsumer consumer = durable ? session.createDurableSubscriber(topic, cid) : session.createConsumer(topic);
        consumer.setMessageListener(m -> onMessage(r, filter, m, ack));
        log.write("subscribed", "topic", filter, "broker", r.broker(), "qos", durable || qos >= 1 ? 1 : 0, "durable", durable);
    }

    void onMessage(Role r, String filter, Message m, int ack) {
        String msgId = null;
        String topic = null;
        try {
            if (m.getJMSDestination() instanceof ActiveMQTopic t) {
                topic = mqttTopic(t.getTopicName());
            }
            if (m instanceof TextMessage tm) {
                JsonNode body = JSON.readTree(tm.getText());
                if (body != null && body.hasNonNull("msg_id")) {
                    msgId = body.get("msg_id").asText();
                }
            }
        } catch (JMSException | IOException ignored) {
            // an unparsable payload is logged with msg_id null
        }
        log.write("received", "msg_id", msgId, "topic", topic, "broker", r.broker(), "subscription", filter);
        if (ack != Session.AUTO_ACKNOWLEDGE) {
            try {
                m.acknowledge();
            } catch (JMSException ignored) {
                // the link died: the broker redelivers (a duplicate, which the contract permits)
            }
        }
    }

    // ---- publisher ---------------------------------------------------------------------------
    record Due(long atNanos, int pub, int seq) {}

    /** The publisher's connection, session and producer; replaced after a send timed out. */
    final class Publisher {
        final Role role;
        final Session session;
        final MessageProducer producer;
        final FailoverTransport failover;

        Publisher() throws JMSException {
            role = new Role("publisher", null);
            synchronized (roles) {
                roles.add(role);
            }
            session = role.connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            producer = session.createProducer(null);
            failover = role.connection.getTransport().narrow(FailoverTransport.class);
        }

        /** Bound the next send to `ms`: the wait for a broker (failover timeout) and for its answer. */
        void bound(long ms) {
            long b = Math.max(1, ms);
            failover.setTimeout(b);
            role.connection.setSendTimeout((int) Math.min(Integer.MAX_VALUE, b));
        }
    }

    Publisher pub;

    void publish() {
        JsonNode pubs = workload.path("publications");
        long t0 = System.nanoTime();
        PriorityQueue<Due> heap = new PriorityQueue<>((a, b) -> Long.compare(a.atNanos, b.atNanos));
        for (int i = 0; i < pubs.size(); i++) {
            if (pubs.get(i).path("count").asLong() > 0) {
                heap.add(new Due(t0, i, 0));
            }
        }
        while (!heap.isEmpty() && stop.getCount() > 0) {
            Due d = heap.poll();
            JsonNode p = pubs.get(d.pub);
            double rate = p.path("rate_per_s").asDouble(1.0);
            if (d.seq + 1 < p.path("count").asLong()) {
                heap.add(new Due(t0 + (long) ((d.seq + 1) / rate * 1e9), d.pub, d.seq + 1));
            }
            long wait = d.atNanos - System.nanoTime();
            try {
                if (wait > 0 && stop.await(wait, TimeUnit.NANOSECONDS)) {
                    break;
                }
            } catch (InterruptedException e) {
                break;
            }
            sendOne(p, agent + "-" + d.pub + "-" + d.seq);
        }
    }

    void sendOne(JsonNode p, String msgId) {
        String topic = p.get("topic").asText();
        int qos = p.path("qos").asInt(1) >= 1 ? 1 : 0;
        ActiveMQTopic dest = new ActiveMQTopic(destination(topic));
        long deadline = System.nanoTime() + conf.publisherTimeoutS * 1_000_000_000L;
        int attempts = 0;
        boolean inFlight = false;
        while (stop.getCount() > 0 && System.nanoTime() < deadline) {
            attempts++;
            Publisher pb = pub;
            log.write("send_attempt", "msg_id", msgId, "topic", topic, "broker", pb == null ? null : pb.role.brokerIfUp(),
                "attempt", attempts, "qos", qos);
            try {
                if (pb == null) {
                    // a new connection: creating it waits for a broker, bounded like a send
                    pb = pub = new Publisher();
                }
                pb.bound((deadline - System.nanoTime()) / 1_000_000);
                TextMessage m = pb.session.createTextMessage(payload(msgId, p.path("payload_bytes").asInt(256)));
                // persistent, non-transacted: a synchronous send, answered once the broker stored it
                int mode = qos >= 1 ? DeliveryMode.PERSISTENT : DeliveryMode.NON_PERSISTENT;
                inFlight = true;
                pb.producer.send(dest, m, mode, Message.DEFAULT_PRIORITY, Message.DEFAULT_TIME_TO_LIVE);
                log.write("sent", "msg_id", msgId, "topic", topic, "broker", pb.role.broker(), "attempts", attempts, "qos", qos);
                return;
            } catch (JMSException e) {
                sleepQuietly(Math.min(conf.backoffInitialMs, Math.max(0, (deadline - System.nanoTime()) / 1_000_000)));
            }
        }
        if (stop.getCount() > 0) {
            log.write("dropped", "msg_id", msgId, "topic", topic, "reason", "publisher_timeout", "attempts", attempts);
            if (inFlight && pub != null) {
                // The failover transport keeps a timed-out request and replays it on its next broker:
                // only closing the connection stops a message reported dropped from reaching one.
                Publisher old = pub;
                pub = null;
                old.role.close("publisher_timeout: closed so the transport cannot replay " + msgId);
            }
        }
    }

    static String payload(String msgId, int bytes) throws JsonError {
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("msg_id", msgId);
        body.put("sent_ts", System.currentTimeMillis() / 1000.0);
        body.put("pad", "");
        String raw = JsonError.write(body);
        if (raw.length() < bytes) {
            body.put("pad", "x".repeat(bytes - raw.length()));
            raw = JsonError.write(body);
        }
        return raw;
    }

    /** Jackson's checked exception kept out of the JMS paths. */
    static final class JsonError extends JMSException {
        JsonError(String msg) {
            super(msg);
        }

        static String write(Object o) throws JsonError {
            try {
                return JSON.writeValueAsString(o);
            } catch (IOException e) {
                throw new JsonError(e.toString());
            }
        }
    }

    static void sleepQuietly(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    // ---- topics: MQTT-style filters in the workload, ActiveMQ names on the wire ----------------
    static String destination(String filter) {
        List<String> out = new ArrayList<>();
        for (String level : filter.split("/", -1)) {
            out.add(level.equals("+") ? "*" : level.equals("#") ? ">" : level);
        }
        return String.join(".", out);
    }

    static String mqttTopic(String name) {
        List<String> out = new ArrayList<>();
        for (String level : name.split("\\.", -1)) {
            out.add(level.equals("*") ? "+" : level.equals(">") ? "#" : level);
        }
        return String.join("/", out);
    }

    // ---- lifecycle ---------------------------------------------------------------------------
    int runAgent() throws InterruptedException {
        JsonNode subs = workload.path("subscriptions");
        List<Thread> threads = new ArrayList<>();
        CountDownLatch subscribed = new CountDownLatch(subs.size());
        for (int i = 0; i < subs.size(); i++) {
            final int index = i;
            threads.add(start("sub-" + i, () -> {
                try {
                    subscribe(index, subs.get(index));
                    subscribed.countDown();
                } catch (JMSException e) {
                    if (stop.getCount() > 0) {
                        System.err.println("openwire-agent: subscription " + index + " failed: " + e);
                    }
                }
            }));
        }
        subscribed.await((long) (conf.subscribeWaitS * 1000), TimeUnit.MILLISECONDS);
        if (workload.path("publications").size() > 0 && stop.getCount() > 0) {
            threads.add(start("pub", this::publish));
        }
        stop.await();
        List<Role> all;
        synchronized (roles) {
            all = new ArrayList<>(roles);
        }
        List<Thread> closers = new ArrayList<>();
        for (Role r : all) {
            closers.add(start("close", () -> r.close("shutdown")));
        }
        for (Thread t : closers) {
            t.join(4000);
        }
        log.close();
        return 0;
    }

    static Thread start(String name, Runnable body) {
        Thread t = new Thread(body, name);
        t.setDaemon(true);
        t.start();
        return t;
    }

    public static void main(String[] args) {
        Map<String, String> opts = new LinkedHashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            opts.put(args[i], args[i + 1]);
        }
        if (args.length % 2 != 0 || !opts.keySet().containsAll(List.of("--config", "--workload", "--log"))) {
            System.err.println("usage: openwire-agent --config agent.conf --workload workload.json --log messages.jsonl");
            System.exit(EXIT_CONFIG);
        }
        Conf conf;
        JsonNode wl;
        try {
            conf = Conf.load(Path.of(opts.get("--config")));
            wl = loadWorkload(Path.of(opts.get("--workload")));
        } catch (ConfigError e) {
            System.err.println("openwire-agent: " + e.getMessage()); // never holds the password
            System.exit(EXIT_CONFIG);
            return;
        }
        OpenWireAgent a;
        try {
            a = new OpenWireAgent(conf, wl, new MessageLog(Path.of(opts.get("--log")), wl.get("run").asText(), wl.get("agent").asText()));
        } catch (IOException e) {
            System.err.println("openwire-agent: cannot open the log: " + e.getMessage());
            System.exit(EXIT_CONFIG);
            return;
        }
        sun.misc.Signal.handle(new sun.misc.Signal("TERM"), s -> a.stop.countDown());
        sun.misc.Signal.handle(new sun.misc.Signal("INT"), s -> a.stop.countDown());
        int code;
        try {
            code = a.runAgent();
        } catch (InterruptedException e) {
            code = 1;
        }
        System.exit(code); // daemon threads of the client library must not hold the JVM
    }

    static JsonNode loadWorkload(Path path) throws ConfigError {
        JsonNode wl;
        try {
            wl = JSON.readTree(Files.readString(path, StandardCharsets.UTF_8));
        } catch (IOException e) {
            throw new ConfigError(path + ": not readable JSON (" + e.getClass().getSimpleName() + ")");
        }
        if (wl == null || !wl.isObject()) {
            throw new ConfigError(path + ": must be a JSON object with run, agent, protocol, ...");
        }
        for (String k : List.of("run", "agent", "protocol")) {
            if (!wl.hasNonNull(k) || wl.get(k).asText().isEmpty()) {
                throw new ConfigError(path + ": " + k + " is required");
            }
        }
        if (!wl.get("protocol").asText().equals("openwire")) {
            throw new ConfigError(path + ": protocol " + wl.get("protocol") + " unsupported (only 'openwire')");
        }
        for (JsonNode p : wl.path("publications")) {
            if (!p.hasNonNull("topic") || p.path("rate_per_s").asDouble(0) <= 0 || p.path("count").asLong(-1) < 0) {
                throw new ConfigError(path + ": each publication needs topic, count >= 0 and rate_per_s > 0");
            }
        }
        for (JsonNode s : wl.path("subscriptions")) {
            if (!s.hasNonNull("topic")) {
                throw new ConfigError(path + ": each subscription needs a topic");
            }
        }
        return wl;
    }

    static final class ConfigError extends Exception {
        ConfigError(String msg) {
            super(msg);
        }
    }

    // ---- agent.conf ----------------------------------------------------------------------------
    static final class Conf {
        final List<URI> urls = new ArrayList<>();
        boolean tls;
        String username = null;
        String password = null;
        long publisherTimeoutS = 900;
        double connectTimeoutS = 2.0;
        int keepaliveS = 2;
        long backoffInitialMs = 100;
        long backoffCapMs = 1000;
        String clientIdPrefix = "bfh";
        String sslCa = null;
        double subscribeWaitS = 30.0;

        static Conf load(Path path) throws ConfigError {
            List<String> lines;
            try {
                lines = Files.readAllLines(path, StandardCharsets.UTF_8);
            } catch (IOException e) {
                throw new ConfigError(path + ": cannot read (" + e.getClass().getSimpleName() + ")");
            }
            Map<String, String> kv = new LinkedHashMap<>();
            boolean inAgent = false;
            boolean sawAgent = false;
            for (String raw : lines) {
                String line = raw.strip();
                if (line.isEmpty() || line.startsWith("#") || line.startsWith(";")) {
                    continue;
                }
                if (line.startsWith("[")) {
                    inAgent = line.equals("[agent]");
                    sawAgent |= inAgent;
                    continue;
                }
                int eq = line.indexOf('=');
                if (eq < 0) {
                    throw new ConfigError(path + ": not a valid INI line (no '=')");
                }
                if (inAgent) {
                    kv.put(line.substring(0, eq).strip().toLowerCase(), line.substring(eq + 1).strip());
                }
            }
            if (!sawAgent) {
                throw new ConfigError(path + ": missing [agent] section");
            }
            Conf c = new Conf();
            String urls = kv.getOrDefault("mb.urls", "");
            if (urls.isEmpty()) {
                throw new ConfigError(path + ": mb.urls is required (comma-separated host:port list)");
            }
            for (String entry : urls.split(",", -1)) {
                c.urls.add(parseUrl(path, entry.strip(), c));
            }
            c.username = kv.getOrDefault("mb.username", "").isEmpty() ? null : kv.get("mb.username");
            c.password = c.username == null ? null : kv.getOrDefault("mb.password", "");
            c.publisherTimeoutS = (long) num(path, kv, "mb.publisher.timeout", c.publisherTimeoutS);
            c.connectTimeoutS = num(path, kv, "mb.connect.timeout", c.connectTimeoutS);
            c.keepaliveS = (int) num(path, kv, "mb.keepalive", c.keepaliveS);
            c.backoffInitialMs = (long) (num(path, kv, "mb.backoff.initial", 0.1) * 1000);
            c.backoffCapMs = (long) (num(path, kv, "mb.backoff.cap", 1.0) * 1000);
            c.subscribeWaitS = num(path, kv, "mb.subscribe.wait", c.subscribeWaitS);
            c.clientIdPrefix = kv.getOrDefault("mb.client.id.prefix", c.clientIdPrefix);
            c.sslCa = kv.getOrDefault("mb.ssl.ca", "").isEmpty() ? null : kv.get("mb.ssl.ca");
            return c;
        }

        static URI parseUrl(Path path, String entry, Conf c) throws ConfigError {
            String scheme = "tcp";
            String rest = entry;
            if (entry.toLowerCase().startsWith("ssl://")) {
                scheme = "ssl";
                rest = entry.substring(6);
                c.tls = true;
            } else if (entry.toLowerCase().startsWith("tcp://")) {
                rest = entry.substring(6);
            } else if (entry.contains("://")) {
                throw new ConfigError(path + ": mb.urls: '" + entry + "': unsupported scheme (use host:port or ssl://host:port)");
            }
            int colon = rest.lastIndexOf(':');
            try {
                int port = Integer.parseInt(rest.substring(colon + 1));
                if (colon <= 0 || port < 1 || port > 65535) {
                    throw new NumberFormatException();
                }
                return new URI(scheme + "://" + rest.substring(0, colon) + ":" + port);
            } catch (Exception e) {
                throw new ConfigError(path + ": mb.urls: '" + entry + "' is not host:port");
            }
        }

        static double num(Path path, Map<String, String> kv, String key, double dflt) throws ConfigError {
            String v = kv.getOrDefault(key, "");
            if (v.isEmpty()) {
                return dflt;
            }
            try {
                double d = Double.parseDouble(v);
                if (!Double.isFinite(d) || d < 0) {
                    throw new NumberFormatException();
                }
                return d;
            } catch (NumberFormatException e) {
                throw new ConfigError(path + ": " + key + " = '" + v + "': must be a number of seconds");
            }
        }

        /** failover:(tcp://a,tcp://b)?randomize=false and the liveness/connect bounds of the contract. */
        String brokerUrl() {
            // The inactivity monitor checks once per interval for a read since the last check, so a
            // silent broker is noticed after 1-2 intervals: half the contract's bound (1.5 x keepalive
            // + 0.5 s) keeps it within the bound (the full bound measured 9.8 s, not <= 8 s).
            long inactivityMs = (long) ((1.5 * keepaliveS + 0.5) * 1000 / 2);
            String nested = "?connectionTimeout=" + (long) (connectTimeoutS * 1000)
                + "&wireFormat.maxInactivityDuration=" + inactivityMs
                + "&wireFormat.maxInactivityDurationInitalDelay=" + inactivityMs;
            List<String> members = new ArrayList<>();
            for (URI u : urls) {
                members.add(u + nested);
            }
            return "failover:(" + String.join(",", members) + ")?randomize=false"
                + "&initialReconnectDelay=" + backoffInitialMs
                + "&maxReconnectDelay=" + backoffCapMs
                + "&useExponentialBackOff=true&maxReconnectAttempts=-1&startupMaxReconnectAttempts=-1"
                // the broker's advertised addresses would bypass the fault proxy: mb.urls only
                + "&updateURIsSupported=false";
        }

        ActiveMQConnectionFactory factory() throws JMSException {
            ActiveMQConnectionFactory f;
            if (tls) {
                ActiveMQSslConnectionFactory s = new ActiveMQSslConnectionFactory(brokerUrl());
                if (sslCa != null) {
                    try {
                        KeyStore ks = KeyStore.getInstance(KeyStore.getDefaultType());
                        ks.load(null, null);
                        int n = 0;
                        for (var cert : CertificateFactory.getInstance("X.509")
                                .generateCertificates(Files.newInputStream(Path.of(sslCa)))) {
                            ks.setCertificateEntry("ca" + n++, (X509Certificate) cert);
                        }
                        TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
                        tmf.init(ks);
                        s.setKeyAndTrustManagers(null, tmf.getTrustManagers(), null);
                    } catch (Exception e) {
                        throw new JMSException("mb.ssl.ca: cannot load " + sslCa + ": " + e.getClass().getSimpleName());
                    }
                }
                f = s;
            } else {
                f = new ActiveMQConnectionFactory(brokerUrl());
            }
            f.setCloseTimeout(2000);
            f.setWatchTopicAdvisories(false);
            return f;
        }
    }

    // ---- the message log: one write of a whole line per record, flushed -------------------------
    static final class MessageLog {
        final java.io.FileOutputStream out;
        final String run;
        final String agent;
        boolean closed;

        MessageLog(Path path, String run, String agent) throws IOException {
            Path parent = path.toAbsolutePath().getParent();
            if (parent != null) {
                Files.createDirectories(parent);
            }
            this.out = new java.io.FileOutputStream(path.toFile(), true);
            this.run = run;
            this.agent = agent;
        }

        void write(String event, Object... fields) {
            Map<String, Object> rec = new LinkedHashMap<>();
            rec.put("ts", System.currentTimeMillis() / 1000.0);
            rec.put("run", run);
            rec.put("agent", agent);
            rec.put("event", event);
            for (int i = 0; i + 1 < fields.length; i += 2) {
                rec.put((String) fields[i], fields[i + 1]);
            }
            byte[] line;
            try {
                line = (JSON.writeValueAsString(rec) + "\n").getBytes(StandardCharsets.UTF_8);
            } catch (IOException e) {
                return;
            }
            synchronized (this) {
                if (closed) {
                    return;
                }
                try {
                    out.write(line); // unbuffered: one write(2) per record
                } catch (IOException e) {
                    System.err.println("openwire-agent: log write failed: " + e.getMessage());
                }
            }
        }

        synchronized void close() {
            if (!closed) {
                closed = true;
                try {
                    out.close();
                } catch (IOException ignored) {
                    // nothing left to lose
                }
            }
        }
    }
}
