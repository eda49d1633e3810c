// The broker witness's advisory observer: one OpenWire connection per broker (a direct,
// harness-only connector), subscribed to ActiveMQ's advisory topics only. Writes JSON Lines
// (ts on the harness clock: epoch seconds) to the file given as the first argument.
//
//   java -cp <activemq jars>:<this class dir> Observer OUT.jsonl name=tcp://127.0.0.1:PORT ...
//
// Reconnects on its own; every time it cannot see a broker is an observer_gap_start /
// observer_gap_end pair. SIGTERM stops it (closing every open window with a gap record).
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

        boolean connected = false;

        // Close the current window of visibility (no-op when there is none).
        synchronized void gapStart(String reason) {
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
                    lastSeen = now();
                    connectedAt = lastSeen;
                    synchronized (this) {
                        if (stopping) break;
                        connected = true;
                        emit(head("observer_gap_end", lastSeen) + "}");
                    }
                    for (String t : new String[] {"ActiveMQ.Advisory.Connection",
                            "ActiveMQ.Advisory.Consumer.Topic.>", "ActiveMQ.Advisory.Producer.Topic.>"}) {
                        MessageConsumer mc = s.createConsumer(new ActiveMQTopic(t));
                        mc.setMessageListener(this::onAdvisory);
                    }
                    while (!stopping && !failed) {
                        Thread.sleep(PROBE_MS);
                        // A round trip proves the broker alive up to now: a paused broker's gap
                        // starts at its last answer, a killed one's at its last answer too.
                        ((ActiveMQConnection) c).syncSendPacket(new ConnectionControl(), 2000);
                        lastSeen = now();
                    }
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

        void onAdvisory(Message m) {
            double t = now();
            lastSeen = t;
            if (!(m instanceof ActiveMQMessage)) return;
            ActiveMQMessage am = (ActiveMQMessage) m;
            DataStructure ds = am.getDataStructure();
            // Advisories replayed to a new advisory subscriber (the broker's current state) are
            // addressed to that consumer; live ones are not.
            // (the client may drop that mark, so whatever arrives in the first second after a
            // connect counts as snapshot too: "existed at or before ts", never "added at ts").
            boolean early = t - connectedAt < SNAPSHOT_S;
            String snap = am.getTargetConsumerId() != null || early ? ",\"snapshot\":true" : "";
            if (ds instanceof ConnectionInfo) {
                ConnectionInfo ci = (ConnectionInfo) ds;
                String id = ci.getConnectionId().toString();
                clientOf.put(id, String.valueOf(ci.getClientId()));
                if (ci.getClientId() != null && ci.getClientId().startsWith("bfh-witness-")) return;
                emit(head("connection_added", t) + ",\"client_id\":" + q(ci.getClientId())
                        + ",\"connection_id\":" + q(id) + ",\"remote\":" + q(ci.getClientIp())
                        + ",\"user\":" + q(ci.getUserName()) + snap + "}");
            } else if (ds instanceof ConsumerInfo) {
                ConsumerInfo ci = (ConsumerInfo) ds;
                String id = ci.getConsumerId().toString();
                String client = ci.getClientId() != null ? ci.getClientId()
                        : clientOf.get(ci.getConsumerId().getConnectionId());
                String[] rec = {client, dest(ci.getDestination()), ci.getSubscriptionName()};
                consumers.put(id, rec);
                // lag: the broker's send of the advisory to its arrival here (one clock): the
                // observer's latency, which widens consumer_confirmed's tolerance (issue 35)
                // (a broker's advisory carries no JMS timestamp: its dispatch time, else its arrival)
                long ms = am.getBrokerOutTime() > 0 ? am.getBrokerOutTime()
                        : Math.max(am.getBrokerInTime(), am.getTimestamp());
                double sent = ms / 1000.0;
                String lag = sent > 0 ? ",\"lag\":" + ts(Math.max(0.0, t - sent)) : "";
                emit(head("consumer_added", t) + ",\"client_id\":" + q(rec[0]) + ",\"destination\":"
                        + q(rec[1]) + ",\"consumer_id\":" + q(id) + ",\"subscription\":" + q(rec[2])
                        + ",\"network\":" + ci.isNetworkSubscription() + snap + lag + "}");
            } else if (ds instanceof ProducerInfo) {
                ProducerInfo pi = (ProducerInfo) ds;
                String id = pi.getProducerId().toString();
                String[] rec = {clientOf.get(pi.getProducerId().getConnectionId()), dest(pi.getDestination())};
                producers.put(id, rec);
                emit(head("producer_added", t) + ",\"client_id\":" + q(rec[0]) + ",\"destination\":"
                        + q(rec[1]) + ",\"producer_id\":" + q(id) + snap + "}");
            } else if (ds instanceof RemoveInfo) {
                DataStructure gone = ((RemoveInfo) ds).getObjectId();
                String id = String.valueOf(gone);
                String type = gone == null ? "" : gone.getClass().getSimpleName();
                if (type.equals("ConnectionId")) {
                    String client = clientOf.remove(id);
                    if (client != null && client.startsWith("bfh-witness-")) return;
                    emit(head("connection_removed", t) + ",\"client_id\":" + q(client)
                            + ",\"connection_id\":" + q(id) + "}");
                } else if (type.equals("ConsumerId")) {
                    String[] rec = consumers.remove(id);
                    emit(head("consumer_removed", t) + ",\"client_id\":" + q(rec == null ? null : rec[0])
                            + ",\"destination\":" + q(rec == null ? dest(am.getJMSDestination()) : rec[1])
                            + ",\"consumer_id\":" + q(id) + "}");
                } else if (type.equals("ProducerId")) {
                    String[] rec = producers.remove(id);
                    emit(head("producer_removed", t) + ",\"client_id\":" + q(rec == null ? null : rec[0])
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
