// A minimal JMS client on ActiveMQ's own failover transport, for the failover benchmark.
//
// java -cp <activemq-client + jms + deps> FailoverClient <brokerUri> <topic> <rate_per_s> <clientId>
//
// One connection (the failover transport hides reconnects), a durable subscriber on <topic> and a
// producer sending persistent messages at <rate_per_s>. Prints one JSON line per event on stdout:
//   {"ev":"sent","ts":<unix s>,"seq":n}   after send() returned (the broker acknowledged it)
//   {"ev":"recv","ts":<unix s>,"seq":n}   when the subscriber got message n
//   {"ev":"interrupted"|"resumed","ts":...} from the failover transport's listener
// Runs until killed.

import javax.jms.Connection;
import javax.jms.DeliveryMode;
import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.MessageProducer;
import javax.jms.Session;
import javax.jms.TextMessage;
import javax.jms.Topic;
import org.apache.activemq.ActiveMQConnection;
import org.apache.activemq.ActiveMQConnectionFactory;
import org.apache.activemq.transport.TransportListener;

public final class FailoverClient {
    private static synchronized void emit(String ev, long seq) {
        double ts = System.currentTimeMillis() / 1000.0;
        System.out.println("{\"ev\":\"" + ev + "\",\"ts\":" + ts + ",\"seq\":" + seq + "}");
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        String uri = args[0];
        String topicName = args[1];
        double rate = Double.parseDouble(args[2]);
        String clientId = args[3];
        ActiveMQConnectionFactory cf = new ActiveMQConnectionFactory(uri);
        ActiveMQConnection conn = (ActiveMQConnection) cf.createConnection();
        conn.setClientID(clientId);
        conn.addTransportListener(new TransportListener() {
            public void onCommand(Object command) { }
            public void onException(java.io.IOException error) { }
            public void transportInterupted() { emit("interrupted", -1); }
            public void transportResumed() { emit("resumed", -1); }
        });
        conn.start();
        Session subSession = conn.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Topic topic = subSession.createTopic(topicName);
        MessageConsumer consumer = subSession.createDurableSubscriber(topic, clientId + "-sub");
        consumer.setMessageListener((Message m) -> {
            try {
                emit("recv", Long.parseLong(((TextMessage) m).getText()));
            } catch (Exception e) {
                emit("recv", -1);
            }
        });
        Session pubSession = conn.createSession(false, Session.AUTO_ACKNOWLEDGE);
        MessageProducer producer = pubSession.createProducer(pubSession.createTopic(topicName));
        producer.setDeliveryMode(DeliveryMode.PERSISTENT);
        long periodNanos = (long) (1e9 / rate);
        long next = System.nanoTime();
        for (long seq = 0; ; seq++) {
            long wait = next - System.nanoTime();
            if (wait > 0) {
                Thread.sleep(wait / 1_000_000L, (int) (wait % 1_000_000L));
            }
            producer.send(pubSession.createTextMessage(Long.toString(seq)));  // blocks during failover
            emit("sent", seq);
            next = Math.max(next + periodNanos, System.nanoTime() - periodNanos);
        }
    }
}
