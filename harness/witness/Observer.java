// The broker witness's advisory observer: one OpenWire connection per broker (a direct,
// harness-only connector), subscribed to ActiveMQ's advisory topics only. Writes JSON Lines
// (ts on the harness clock: epoch seconds) to the file given as the first argument.
//
//   java -cp <activemq jars>:<this class dir> Observer OUT.jsonl name=tcp://127.0.0.1:PORT ...
//
// Reconnects on its own; every time it cannot see a broker is an observer_gap_start /
// observer_gap_end pair. SIGTERM stops it (closing every open window with a gap record).
// observer_gap_end is written once every advisory subscription is active (what arrived meanwhile
// is held back and follows it), so a harness that waits for it starts clients the observer sees.
// A consumer added while the advisory consumers subscribe can be in neither the replay nor the
// live advisories (soak round 4, issue 35): SNAPSHOT_S after each connect a second advisory
// consumer re-replays the broker's consumers and the ones missed follow as "resnapshot" records.
import java.io.FileOutputStream;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import javax.jms.Connection;
import javax.jms.JMSException;
import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.Session;
import org.apache.activemq.ActiveMQConnection;
import org.apache.activemq.ActiveMQConnectionFactory;
import org.apache.activemq.command.ActiveMQMessage;
import org.apache.activemq.command.ActiveMQTopic;
import org.apache.activemq.command.ConnectionControl;
import org.apache.activemq.command.ConnectionInfo;
import org.apache.activemq.command.ConsumerInfo;
import org.apache.activemq.command.DataStructure;
import org.apache.activemq.command.ProducerInfo;
import org.apache.activemq.command.RemoveInfo;
import org.apache.activemq.transport.TransportListener;

public class Observer {
    static final int PROBE_MS = 250;
    static final double SNAPSHOT_S = 1.0;
    static final double RESNAPSHOT_HOLD_S = 1.0; // how long the re-replaying consumer stays open
    // Consumers of topics, and of virtual topics' consumer queues (`Consumer.<client>.VirtualTopic.<topic>`:
    // an MQTT connector with the virtual-topic subscription strategy makes each durable
    // subscription one): the harness maps the queue back to the topic it serves.
    static final String[] CONSUMER_ADVISORIES = {"ActiveMQ.Advisory.Consumer.Topic.>",
            "ActiveMQ.Advisory.Consumer.Queue.Consumer.>"};
    static final String[] ADVISORIES = {"ActiveMQ.Advisory.Connection", CONSUMER_ADVISORIES[0],
            CONSUMER_ADVISORIES[1], "ActiveMQ.Advisory.Producer.Topic.>"};
    // the re-replay: connections first (one session delivers in order), so a consumer whose
    // connection's live advisory was missed while subscribing gets its client id (1 in 500 did not)
    static final String[] RESNAPSHOT_ADVISORIES = {"ActiveMQ.Advisory.Connection", CONSUMER_ADVISORIES[0],
            CONSUMER_ADVISORIES[1]};
    static Writer out;
    static volatile boolean stopping = false;

    static synchronized void emit(String json) {
        try {
            out.write(json);
            out.write('\n');
            out.flush();
        } catch (Exception e) {
            // nothing to do: the harness reads what was written
        }
    }

    static String q(Object o) {
        if (o == null) return "null";
        String s = o.toString();
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    static double now() {
        return System.currentTimeMillis() / 1000.0;
    }

    static String ts(double t) {
        return String.format(java.util.Locale.ROOT, "%.3f", t);
    }

    static class Watch implements Runnable {
        final String broker;
        final String url;
        volatile double lastSeen = 0;
        volatile double connectedAt = 0;
        volatile boolean failed = false;
        volatile int generation = 0; // listeners of an old connection must not fail the new one
        final Map<String, String> clientOf = new ConcurrentHashMap<>(); // connection id -> client id
        final Map<String, String[]> consumers = new ConcurrentHashMap<>(); // id -> client, dest, sub
        final Map<String, String[]> producers = new ConcurrentHashMap<>();
        final Map<String, Boolean> removed = new ConcurrentHashMap<>(); // consumer ids seen removed
        // the re-replay's finds: the re-replaying consumer gets live advisories too (the client
        // drops the replay's target mark), so a find counts only if no live advisory names it
        final Map<String, Object[]> finds = new ConcurrentHashMap<>(); // id -> rec, record
        final java.util.List<String> held = new java.util.ArrayList<>(); // records before gap_end

        boolean connected = false;

        // A record of the current connection: held back until its gap_end is written.
        synchronized void record(String json) {
            if (connected) emit(json);
            else held.add(json);
        }

        // Close the current window of visibility (no-op when there is none).
        synchronized void gapStart(String reason) {
            held.clear();
            if (!connected) return;
            connected = false;
            // Seen alive up to the last answer; when the observer itself stops, up to now.
            double since = lastSeen > 0 && !stopping ? lastSeen : now();
            emit(head("observer_gap_start", since) + ",\"reason\":" + q(reason)
                    + ",\"detected\":" + ts(now()) + "}");
            lastSeen = 0;
        }

        Watch(String broker, String url) {
            this.broker = broker;
            this.url = url;
        }

        String head(String event, double t) {
            return "{\"ts\":" + ts(t) + ",\"event\":" + q(event) + ",\"broker\":" + q(broker) + ",\"source\":\"advisory\"";
        }

        public void run() {
            String reason = "observer starting";
            emit(head("observer_gap_start", now()) + ",\"reason\":" + q(reason) + "}");
            while (!stopping) {
                Connection c = null;
                try {
                    ActiveMQConnectionFactory f = new ActiveMQConnectionFactory(url);
                    f.setWatchTopicAdvisories(false); // no advisory consumers of its own beyond ours
                    f.setClientID("bfh-witness-" + broker);
                    String user = System.getenv("BFH_WITNESS_USER"); // a secured topology's bridge user
                    if (user != null && !user.isEmpty()) {
                        f.setUserName(user);
                        f.setPassword(System.getenv("BFH_WITNESS_PASSWORD"));
                    }
                    c = f.createConnection();
                    failed = false;
                    final int gen = ++generation;
                    ((ActiveMQConnection) c).addTransportListener(new TransportListener() {
                        public void onCommand(Object command) {
                            if (gen == generation) lastSeen = now();
                        }

                        public void onException(java.io.IOException error) {
                            if (gen == generation) failed = true;
                        }

                        public void transportInterupted() {
                            if (gen == generation) failed = true;
                        }

                        public void transportResumed() {}
                    });
                    c.start();
                    Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                    clientOf.clear();
                    consumers.clear();
                    producers.clear();
                    removed.clear();
                    finds.clear();
                    lastSeen = now();
                    connectedAt = lastSeen;
                    synchronized (this) {
                        held.clear();
                    }
                    for (String t : ADVISORIES) { // each returns once the broker has it (and replayed)
                        MessageConsumer mc = s.createConsumer(new ActiveMQTopic(t));
                        mc.setMessageListener(m -> {
                            if (gen == generation) onAdvisory(m, false);
                        });
                    }
                    synchronized (this) {
                        if (stopping) break;
                        connected = true;
                        emit(head("observer_gap_end", connectedAt) + "}");
                        for (String r : held) emit(r);
                        held.clear();
                    }
                    probe((ActiveMQConnection) c, s, gen);
                    reason = stopping ? "observer stopping" : "connection lost";
                } catch (JMSException e) {
                    reason = (connected ? "connection lost: " : "connect failed: ") + e.getMessage();
                } catch (InterruptedException e) {
                    reason = "observer stopping";
                    stopping = true;
                }
                generation++;
                gapStart(reason);
                if (c != null) {
                    Connection cc = c;
                    Thread closer = new Thread(() -> { // close can block on a paused broker
                        try { cc.close(); } catch (Exception e) { /* gone already */ }
                    });
                    closer.setDaemon(true);
                    closer.start();
                }
                try {
                    Thread.sleep(200);
                } catch (InterruptedException e) {
                    stopping = true;
                }
            }
        }

        // Probe the broker until it fails; re-replay its consumers once, SNAPSHOT_S after connecting.
        void probe(ActiveMQConnection c, Session s, int gen) throws JMSException, InterruptedException {
            java.util.List<MessageConsumer> again = new java.util.ArrayList<>();
            double againAt = 0;
            while (!stopping && !failed) {
                Thread.sleep(PROBE_MS);
                // A round trip proves the broker alive up to now: a paused broker's gap
                // starts at its last answer, a killed one's at its last answer too.
                c.syncSendPacket(new ConnectionControl(), 2000);
                lastSeen = now();
                if (againAt == 0 && lastSeen - connectedAt >= SNAPSHOT_S) {
                    for (String t : RESNAPSHOT_ADVISORIES) {
                        MessageConsumer mc = s.createConsumer(new ActiveMQTopic(t));
                        mc.setMessageListener(m -> {
                            if (gen == generation) onAdvisory(m, true);
                        });
                        again.add(mc);
                    }
                    againAt = lastSeen;
                } else if (!again.isEmpty() && lastSeen - againAt >= RESNAPSHOT_HOLD_S) {
                    for (MessageConsumer mc : again) mc.close();
                    again.clear();
                    for (Map.Entry<String, Object[]> f : finds.entrySet()) {
                        String[] known = consumers.get(f.getKey());
                        if (removed.containsKey(f.getKey()) || known != null && known[0] != null) continue;
                        consumers.put(f.getKey(), (String[]) f.getValue()[0]);
                        record((String) f.getValue()[1]);
                    }
                    finds.clear();
                }
            }
        }

        // resnap: a message of the re-replaying consumer: only consumers not seen yet count.
        void onAdvisory(Message m, boolean resnap) {
            double t = now();
            lastSeen = t;
            if (!(m instanceof ActiveMQMessage)) return;
            ActiveMQMessage am = (ActiveMQMessage) m;
            DataStructure ds = am.getDataStructure();
            if (resnap && ds instanceof ConnectionInfo) { // only the client id it names
                ConnectionInfo ci = (ConnectionInfo) ds;
                clientOf.putIfAbsent(ci.getConnectionId().toString(), String.valueOf(ci.getClientId()));
                return;
            }
            if (resnap && !(ds instanceof ConsumerInfo)) return;
            // Advisories replayed to a new advisory subscriber (the broker's current state) are
            // addressed to that consumer; live ones are not.
            // (the client may drop that mark, so whatever arrives in the first second after a
            // connect counts as snapshot too: "existed at or before ts", never "added at ts").
            boolean early = t - connectedAt < SNAPSHOT_S;
            String snap = resnap ? ",\"snapshot\":true,\"resnapshot\":true"
                    : am.getTargetConsumerId() != null || early ? ",\"snapshot\":true" : "";
            if (ds instanceof ConnectionInfo) {
                ConnectionInfo ci = (ConnectionInfo) ds;
                String id = ci.getConnectionId().toString();
                clientOf.put(id, String.valueOf(ci.getClientId()));
                if (ci.getClientId() != null && ci.getClientId().startsWith("bfh-witness-")) return;
                record(head("connection_added", t) + ",\"client_id\":" + q(ci.getClientId())
                        + ",\"connection_id\":" + q(id) + ",\"remote\":" + q(ci.getClientIp())
                        + ",\"user\":" + q(ci.getUserName()) + snap + "}");
            } else if (ds instanceof ConsumerInfo) {
                ConsumerInfo ci = (ConsumerInfo) ds;
                String id = ci.getConsumerId().toString();
                String client = ci.getClientId() != null ? ci.getClientId()
                        : clientOf.get(ci.getConsumerId().getConnectionId());
                String[] known = consumers.get(id);
                // re-replayed: one never seen, or one first seen before its connection (no client)
                if (resnap && (removed.containsKey(id) || known != null && (known[0] != null || client == null))) {
                    return;
                }
                // the same consumer again (a replay raced its live advisory): one record is its span
                if (!resnap && known != null && (known[0] != null || client == null)) return;
                String[] rec = {client, dest(ci.getDestination()), ci.getSubscriptionName()};
                if (!resnap) {
                    finds.remove(id); // live: not the re-replay's find
                    consumers.put(id, rec);
                }
                // lag: the broker's send of the advisory to its arrival here (one clock): the
                // observer's latency, which widens consumer_confirmed's tolerance (issue 35)
                // (a broker's advisory carries no JMS timestamp: its dispatch time, else its arrival)
                long ms = am.getBrokerOutTime() > 0 ? am.getBrokerOutTime()
                        : Math.max(am.getBrokerInTime(), am.getTimestamp());
                double sent = ms / 1000.0;
                String lag = sent > 0 ? ",\"lag\":" + ts(Math.max(0.0, t - sent)) : "";
                String json = head("consumer_added", t) + ",\"client_id\":" + q(rec[0]) + ",\"destination\":"
                        + q(rec[1]) + ",\"consumer_id\":" + q(id) + ",\"subscription\":" + q(rec[2])
                        + ",\"network\":" + ci.isNetworkSubscription() + snap + lag + "}";
                if (resnap) finds.put(id, new Object[] {rec, json});
                else record(json);
            } else if (ds instanceof ProducerInfo) {
                ProducerInfo pi = (ProducerInfo) ds;
                String id = pi.getProducerId().toString();
                String[] rec = {clientOf.get(pi.getProducerId().getConnectionId()), dest(pi.getDestination())};
                producers.put(id, rec);
                record(head("producer_added", t) + ",\"client_id\":" + q(rec[0]) + ",\"destination\":"
                        + q(rec[1]) + ",\"producer_id\":" + q(id) + snap + "}");
            } else if (ds instanceof RemoveInfo) {
                DataStructure gone = ((RemoveInfo) ds).getObjectId();
                String id = String.valueOf(gone);
                String type = gone == null ? "" : gone.getClass().getSimpleName();
                if (type.equals("ConnectionId")) {
                    String client = clientOf.remove(id);
                    if (client != null && client.startsWith("bfh-witness-")) return;
                    record(head("connection_removed", t) + ",\"client_id\":" + q(client)
                            + ",\"connection_id\":" + q(id) + "}");
                } else if (type.equals("ConsumerId")) {
                    String[] rec = consumers.remove(id);
                    removed.put(id, Boolean.TRUE);
                    record(head("consumer_removed", t) + ",\"client_id\":" + q(rec == null ? null : rec[0])
                            + ",\"destination\":" + q(rec == null ? dest(am.getJMSDestination()) : rec[1])
                            + ",\"consumer_id\":" + q(id) + "}");
                } else if (type.equals("ProducerId")) {
                    String[] rec = producers.remove(id);
                    record(head("producer_removed", t) + ",\"client_id\":" + q(rec == null ? null : rec[0])
                            + ",\"destination\":" + q(rec == null ? null : rec[1])
                            + ",\"producer_id\":" + q(id) + "}");
                }
            }
        }

        static String dest(Object d) {
            if (d == null) return null;
            if (d instanceof ActiveMQTopic) return ((ActiveMQTopic) d).getPhysicalName();
            return d.toString();
        }

    }

    public static void main(String[] args) throws Exception {
        out = new OutputStreamWriter(new FileOutputStream(args[0], true), StandardCharsets.UTF_8);
        java.util.List<Watch> watches = new java.util.ArrayList<>();
        for (int i = 1; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            Watch w = new Watch(kv[0], kv[1]);
            watches.add(w);
            Thread t = new Thread(w, "witness-" + kv[0]);
            t.setDaemon(true);
            t.start();
        }
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stopping = true;
            for (Watch w : watches) w.gapStart("observer stopping");
        }));
        Thread.currentThread().join();
    }
}
